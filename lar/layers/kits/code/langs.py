"""Languages by file extension, and the per-language tree-sitter queries of the symbols layer.

Each query captures definitions as ``@def.<kind>`` (kind: function, method, constructor, class,
struct, union, interface, trait, enum, type, namespace, module, macro), scopes that qualify names
without being definitions themselves as ``@scope.<kind>`` (Rust ``impl`` blocks) and call sites as
``@call``. Names, qualifiers, signatures and docstrings are read from the captured nodes by
``lar.layers.kits.code.treesitter``. Grammar names are those of ``tree-sitter-language-pack``; the same names
are understood by ast-grep (``lar.layers.structural``), which knows a few more languages.
"""
from __future__ import annotations

import posixpath

# -- tree-sitter (symbols) ------------------------------------------------------------------
SYMBOL_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp", ".inl": "cpp", ".tpp": "cpp",
}
# headers that do not parse cleanly as C are tried as C++
FALLBACK_GRAMMAR: dict[str, str] = {".h": "cpp"}


def extension(path: str) -> str:
    """The lower-cased extension of ``path`` ('' when it has none)."""
    return posixpath.splitext(path.rsplit("/", 1)[-1])[1].lower()


def symbol_language(path: str) -> str | None:
    """The tree-sitter grammar the symbols layer uses for ``path``, or None."""
    return SYMBOL_EXTENSIONS.get(extension(path))


# -- ast-grep (structural) ------------------------------------------------------------------
SG_EXTENSIONS: dict[str, str] = {
    **SYMBOL_EXTENSIONS,
    ".cs": "csharp", ".kt": "kotlin", ".kts": "kotlin", ".rb": "ruby", ".swift": "swift",
    ".lua": "lua", ".php": "php", ".scala": "scala", ".sc": "scala", ".sh": "bash",
    ".bash": "bash", ".html": "html", ".htm": "html", ".css": "css", ".json": "json",
    ".yaml": "yaml", ".yml": "yaml", ".hs": "haskell", ".ex": "elixir", ".exs": "elixir",
    ".nix": "nix", ".sol": "solidity", ".hcl": "hcl", ".tf": "hcl", ".dart": "dart",
    ".zig": "zig",
}
SG_LANGUAGES = frozenset(SG_EXTENSIONS.values())
SG_ALIASES: dict[str, str] = {
    "py": "python", "js": "javascript", "jsx": "javascript", "ts": "typescript",
    "golang": "go", "rs": "rust", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "c#": "csharp",
    "cs": "csharp", "kt": "kotlin", "rb": "ruby", "sh": "bash", "shell": "bash", "yml": "yaml",
    "hs": "haskell", "ex": "elixir", "terraform": "hcl",
}
# extensions a language also claims when it is named explicitly (a .h file may be C++)
SG_EXTRA_CLAIMS: dict[str, frozenset[str]] = {"cpp": frozenset({".h"})}
# languages whose patterns are syntax-checked (metavariables become µ-identifiers there)
SG_CHECKED = frozenset({"python", "javascript", "typescript", "tsx", "go", "rust", "java", "c",
                        "cpp", "csharp", "kotlin"})


def sg_language(path: str) -> str | None:
    """The ast-grep language inferred from ``path``'s extension, or None."""
    return SG_EXTENSIONS.get(extension(path))


def normalize_sg_language(name: str) -> str | None:
    """An ast-grep language name for ``name`` (case-insensitive, common aliases), or None."""
    key = name.strip().lower()
    key = SG_ALIASES.get(key, key)
    return key if key in SG_LANGUAGES else None


# -- queries --------------------------------------------------------------------------------
_JS = """
(function_declaration) @def.function
(generator_function_declaration) @def.function
(class_declaration) @def.class
(method_definition) @def.method
(variable_declarator value: [(arrow_function) (function_expression) (generator_function)]) @def.function
(variable_declarator value: (class)) @def.class
(call_expression) @call
(new_expression) @call
"""
_TS = _JS + """
(abstract_class_declaration) @def.class
(interface_declaration) @def.interface
(enum_declaration) @def.enum
(type_alias_declaration) @def.type
(internal_module) @def.namespace
(method_signature) @def.method
(abstract_method_signature) @def.method
(function_signature) @def.function
"""
_C = """
(function_definition) @def.function
(struct_specifier body: (_)) @def.struct
(union_specifier body: (_)) @def.union
(enum_specifier body: (_)) @def.enum
(call_expression) @call
"""
QUERIES: dict[str, str] = {
    "python": """
(function_definition) @def.function
(class_definition) @def.class
(call) @call
""",
    "javascript": _JS,
    "typescript": _TS,
    "tsx": _TS,
    "go": """
(function_declaration) @def.function
(method_declaration) @def.method
(type_spec) @def.type
(method_elem) @def.method
(call_expression) @call
""",
    "rust": """
(function_item) @def.function
(function_signature_item) @def.function
(struct_item) @def.struct
(enum_item) @def.enum
(union_item) @def.union
(trait_item) @def.trait
(mod_item) @def.module
(macro_definition) @def.macro
(type_item) @def.type
(impl_item) @scope.impl
(call_expression) @call
(macro_invocation) @call
""",
    "java": """
(class_declaration) @def.class
(record_declaration) @def.class
(interface_declaration) @def.interface
(annotation_type_declaration) @def.interface
(enum_declaration) @def.enum
(method_declaration) @def.method
(constructor_declaration) @def.constructor
(method_invocation) @call
(object_creation_expression) @call
""",
    "c": _C,
    "cpp": _C + """
(class_specifier body: (_)) @def.class
(namespace_definition) @def.namespace
""",
}

# kinds whose functions are methods
CLASS_LIKE = frozenset({"class", "struct", "union", "interface", "trait", "enum", "impl"})
# nodes that wrap one definition: the definition's span (and its leading comments) start there
WRAPPERS = frozenset({"export_statement", "decorated_definition", "template_declaration",
                      "type_definition"})
# wrappers that count only when they hold a single declarator / spec
SINGLE_WRAPPERS = frozenset({"lexical_declaration", "variable_declaration", "type_declaration"})
COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
# nodes allowed between a definition and its leading comment (Rust attributes, Java annotations)
ATTRIBUTES = frozenset({"attribute_item", "inner_attribute_item", "marker_annotation",
                        "annotation", "decorator"})
# C/C++ declarators a function name is wrapped in
DECLARATORS = frozenset({"function_declarator", "pointer_declarator", "reference_declarator",
                         "parenthesized_declarator", "array_declarator", "attributed_declarator"})
# the field holding the callee of each call node type
CALLEE_FIELD: dict[str, str] = {
    "call": "function", "call_expression": "function", "new_expression": "constructor",
    "method_invocation": "name", "object_creation_expression": "type", "macro_invocation": "macro",
}
# the field holding the last name of a callee expression, per node type
MEMBER_FIELD: dict[str, str] = {
    "attribute": "attribute", "member_expression": "property", "selector_expression": "field",
    "field_expression": "field", "scoped_identifier": "name", "qualified_identifier": "name",
    "template_function": "name", "generic_function": "function", "generic_type": "type",
    "scoped_type_identifier": "name", "optional_chain": "property",
}
