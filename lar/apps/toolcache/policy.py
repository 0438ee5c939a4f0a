"""The allow-list: per command (and per git subcommand) the options it may take, with their
arity and value kind. Anything not named here is refused (``lar.apps.toolcache.options``).

Left out on purpose: options that run programs (``--pre``, ``-O``/``--open-files-in-pager``,
``-exec``), write files (``--output``, ``-fprint``, ``-delete``), read files named in a value
(``-f``/``--file``, ``--contents``, ``--ignore-file``), follow symlinks (``-R``, ``-L``,
``--follow``, ``--dereference*``), widen what ripgrep's ignore rules allow (``-u``,
``--no-ignore*``, ``--hidden``, positive ``--glob``), reach outside the root's subtree
(``--no-relative``, ``--full-name``, ``--no-index``, ``--git-dir``, ``--work-tree``, ``-C``,
``-c``, ``--exec-path``), wait forever (``tail -f``), or list ignored files (``--ignored``,
``ls-files -o``). Every table is small on purpose; add an option only with a test.
"""
from __future__ import annotations

from typing import Mapping

from lar.apps.toolcache.options import FLAG, VALUE, Opt, Table

F = Opt(FLAG)
TEXT, INT, PATH, GLOB, XGLOB = (Opt(VALUE, "text"), Opt(VALUE, "int"), Opt(VALUE, "path"),
                                Opt(VALUE, "glob"), Opt(VALUE, "exclude-glob"))


def _t(name: str, long: Mapping[str, Opt], short: Mapping[str, Opt] = {},
       refused: Mapping[str, str] = {}, abbreviations: bool = True) -> Table:
    return Table(name, dict(long), dict(short), dict(refused), abbreviations)


RUNS = "runs another program"
FOLLOWS = "follows symlinks out of the root"
WIDENS = "reads ignored or hidden files, which are never material"
READS = "reads a file named in its value"
WRITES = "writes a file"
LEAVES = "reaches outside the root's subtree"
WAITS = "never ends"

GREP = _t("grep", {
    "--recursive": F, "--line-number": F, "--ignore-case": F, "--no-ignore-case": F,
    "--word-regexp": F, "--line-regexp": F, "--invert-match": F, "--count": F,
    "--files-with-matches": F, "--files-without-match": F, "--with-filename": F, "--only-matching": F, "--no-messages": F, "--quiet": F,
    "--silent": F, "--extended-regexp": F, "--fixed-strings": F, "--basic-regexp": F,
    "--perl-regexp": F, "--regexp": TEXT, "--after-context": INT, "--before-context": INT,
    "--context": INT, "--max-count": INT, "--include": GLOB, "--exclude": GLOB,
    "--exclude-dir": GLOB, "--binary-files": TEXT, "--text": F,
    "--byte-offset": F, "--label": TEXT,
}, {"-r": F, "-n": F, "-i": F, "-y": F, "-w": F, "-x": F, "-v": F, "-c": F, "-l": F, "-L": F,
    "-H": F, "-o": F, "-s": F, "-q": F, "-E": F, "-F": F, "-G": F, "-P": F, "-e": TEXT,
    "-A": INT, "-B": INT, "-C": INT, "-m": INT, "-I": F, "-a": F, "-b": F}, {"--dereference-recursive": FOLLOWS, "-R": FOLLOWS, "--file": READS, "-f": READS,
               "--exclude-from": READS, "--directories": FOLLOWS, "-d": FOLLOWS,
               "--devices": READS, "-D": READS, "--color": "not needed", "--colour": "not needed",
               "--no-filename": "hides the file name the output filter checks",
               "-h": "hides the file name the output filter checks",
               "--null": "hides the file name the output filter checks",
               "-Z": "hides the file name the output filter checks"})

RG = _t("rg", {
    "--line-number": F, "--no-line-number": F, "--ignore-case": F, "--smart-case": F,
    "--case-sensitive": F, "--word-regexp": F, "--line-regexp": F, "--invert-match": F,
    "--count": F, "--count-matches": F, "--files-with-matches": F, "--files-without-match": F,
    "--fixed-strings": F, "--regexp": TEXT, "--after-context": INT, "--before-context": INT,
    "--context": INT, "--max-count": INT, "--max-depth": INT, "--type": TEXT, "--type-not": TEXT,
    "--glob": XGLOB, "--iglob": XGLOB, "--only-matching": F, "--with-filename": F,
    "--no-filename": F, "--heading": F, "--no-heading": F, "--json": F, "--vimgrep": F,
    "--column": F, "--sort": TEXT, "--sortr": TEXT, "--files": F, "--multiline": F, "--pcre2": F,
    "--trim": F, "--quiet": F, "--max-columns": INT, "--null": F, "--stats": F,
}, {"-n": F, "-N": F, "-i": F, "-S": F, "-s": F, "-w": F, "-x": F, "-v": F, "-c": F, "-l": F,
    "-F": F, "-e": TEXT, "-A": INT, "-B": INT, "-C": INT, "-m": INT, "-t": TEXT, "-T": TEXT,
    "-g": XGLOB, "-o": F, "-H": F, "-I": F, "-U": F, "-P": F, "-q": F, "-M": INT, "-0": F,
    "-d": INT}, {
    "-u": WIDENS, "--unrestricted": WIDENS, "--no-ignore": WIDENS, "--no-ignore-vcs": WIDENS,
    "--no-ignore-dot": WIDENS, "--no-ignore-files": WIDENS, "--no-ignore-global": WIDENS,
    "--no-ignore-parent": WIDENS, "--no-ignore-exclude": WIDENS, "--hidden": WIDENS,
    "-.": WIDENS, "--ignore-file": READS, "--follow": FOLLOWS, "-L": FOLLOWS, "--pre": RUNS,
    "--pre-glob": RUNS, "--search-zip": RUNS, "-z": RUNS, "--hostname-bin": RUNS,
    "--file": READS, "-f": READS, "--type-add": "not needed", "--no-config": "always set",
    "--no-require-git": "always set"}, abbreviations=False)  # ripgrep takes no prefixes

LS = _t("ls", {"--human-readable": F, "--reverse": F, "--recursive": F, "--directory": F,
               "--classify": F, "--size": F, "--inode": F},
        {"-l": F, "-1": F, "-h": F, "-s": F, "-S": F, "-t": F, "-r": F, "-d": F, "-F": F,
         "-p": F, "-R": F, "-i": F, "-n": F, "-g": F, "-o": F},
        {"-a": WIDENS, "--all": WIDENS, "-A": WIDENS, "--almost-all": WIDENS, "-L": FOLLOWS,
         "--dereference": FOLLOWS, "-H": FOLLOWS,
         "--dereference-command-line": FOLLOWS})
CAT = _t("cat", {"--number": F, "--number-nonblank": F, "--squeeze-blank": F,
                 "--show-ends": F, "--show-tabs": F, "--show-nonprinting": F, "--show-all": F},
         {"-n": F, "-b": F, "-s": F, "-E": F, "-T": F, "-v": F, "-A": F})
HEAD = _t("head", {"--lines": INT, "--bytes": INT, "--quiet": F, "--silent": F, "--verbose": F},
          {"-n": INT, "-c": INT, "-q": F, "-v": F})
TAIL = _t("tail", {"--lines": INT, "--bytes": INT, "--quiet": F, "--silent": F, "--verbose": F},
          {"-n": INT, "-c": INT, "-q": F, "-v": F},
          {"--follow": WAITS, "-f": WAITS, "-F": WAITS, "--retry": WAITS, "--pid": WAITS,
           "--sleep-interval": WAITS, "-s": WAITS})
WC = _t("wc", {"--lines": F, "--words": F, "--bytes": F, "--chars": F, "--max-line-length": F},
        {"-l": F, "-w": F, "-c": F, "-m": F, "-L": F}, {"--files0-from": READS})

TABLES: dict[str, Table] = {t.name: t for t in (GREP, RG, LS, CAT, HEAD, TAIL, WC)}

# -- git ----------------------------------------------------------------------------------------
GIT_REFUSED = {
    "--no-relative": LEAVES, "--relative": "always set", "--output": WRITES,
    "--output-directory": WRITES, "--ext-diff": RUNS, "--textconv": RUNS, "--no-index": LEAVES,
    "--open-files-in-pager": RUNS, "-O": RUNS, "--exec-path": RUNS, "--git-dir": LEAVES,
    "--work-tree": LEAVES, "--full-name": LEAVES, "--contents": READS, "--ignored": WIDENS,
    "--no-exclude-standard": WIDENS, "--untracked": WIDENS, "--others": WIDENS, "-o": WIDENS,
    "--recurse-submodules": LEAVES, "--config-env": RUNS, "--all": LEAVES, "--file": READS,
    "-f": READS, "--follow": "not needed", "--color": "not needed", "--exclude-from": READS,
    "--no-textconv": "always set", "--no-ext-diff": "always set", "--exclude": WIDENS,
    "-x": WIDENS, "-X": WIDENS, "-i": WIDENS, "--root": LEAVES, "-S": READS,
}
DIFF_LONG = {"--stat": F, "--shortstat": F, "--numstat": F, "--name-only": F, "--name-status": F,
             "--patch": F, "--no-patch": F, "--unified": INT, "--ignore-all-space": F,
             "--ignore-space-change": F, "--ignore-blank-lines": F, "--summary": F,
             "--no-color": F, "--no-renames": F, "--raw": F, "--minimal": F, "--histogram": F}
DIFF_SHORT = {"-p": F, "-u": F, "-U": INT, "-w": F, "-b": F, "-s": F}
LOG_LONG = {"--format": TEXT, "--pretty": TEXT, "--oneline": F, "--max-count": INT,
            "--skip": INT, "--since": TEXT, "--until": TEXT, "--after": TEXT, "--before": TEXT,
            "--author": TEXT, "--committer": TEXT, "--grep": TEXT, "--reverse": F,
            "--no-merges": F, "--merges": F, "--first-parent": F, "--date": TEXT,
            "--regexp-ignore-case": F, "--abbrev-commit": F, "--no-abbrev-commit": F}


def _git(sub: str, long: Mapping[str, Opt], short: Mapping[str, Opt] = {}) -> Table:
    return _t(f"git {sub}", long, short, GIT_REFUSED)


GIT_TABLES: dict[str, Table] = {
    "log": _git("log", {**DIFF_LONG, **LOG_LONG}, {**DIFF_SHORT, "-n": INT}),
    "show": _git("show", {**DIFF_LONG, **LOG_LONG, "--quiet": F}, DIFF_SHORT),
    "diff": _git("diff", {**DIFF_LONG, "--cached": F, "--staged": F, "--quiet": F,
                          "--exit-code": F, "--check": F}, DIFF_SHORT),
    "status": _git("status", {"--short": F, "--branch": F, "--porcelain": F, "--long": F,
                              "--no-renames": F}, {"-s": F, "-b": F}),
    "grep": _git("grep", {"--line-number": F, "--ignore-case": F, "--word-regexp": F,
                          "--invert-match": F, "--count": F, "--files-with-matches": F,
                          "--files-without-match": F, "--extended-regexp": F,
                          "--fixed-strings": F, "--perl-regexp": F, "--basic-regexp": F,
                          "--after-context": INT, "--before-context": INT, "--context": INT,
                          "--cached": F, "--max-depth": INT, "--only-matching": F,
                          "--heading": F, "--break": F, "--quiet": F, "--column": F,
                          "--show-function": F, "--all-match": F, "--and": F, "--or": F,
                          "--not": F, "--no-color": F},
                 {"-n": F, "-w": F, "-v": F, "-c": F, "-l": F, "-L": F, "-H": F,
                  "-e": TEXT, "-E": F, "-F": F, "-P": F, "-G": F, "-A": INT, "-B": INT,
                  "-C": INT, "-I": F, "-q": F, "-p": F, "-i": F, "-o": F}),
    "blame": _git("blame", {"--porcelain": F, "--line-porcelain": F, "--show-email": F,
                            "--show-number": F},
                  {"-L": TEXT, "-e": F, "-s": F, "-w": F, "-n": F, "-l": F, "-t": F}),
    "ls-files": _git("ls-files", {"--cached": F, "--modified": F, "--deleted": F,
                                  "--stage": F, "--eol": F}, {"-c": F, "-m": F, "-d": F,
                                                              "-s": F, "-t": F, "-z": F}),
}
GIT_SUBCOMMANDS = tuple(GIT_TABLES)
GIT_RELATIVE = ("diff", "log", "show")  # these get --relative (diff output under the root)

# -- find: primaries, not getopt ----------------------------------------------------------------
FIND_PRIMARIES: dict[str, int] = {  # name -> how many values follow
    "-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-regex": 1,
    "-iregex": 1, "-type": 1, "-size": 1, "-mtime": 1, "-mmin": 1, "-newer": 1, "-empty": 0,
    "-print": 0, "-not": 0, "!": 0, "-a": 0, "-and": 0, "-o": 0, "-or": 0,
    "(": 0, ")": 0, "-true": 0, "-false": 0, "-readable": 0, "-executable": 0, "-links": 1,
}
FIND_GLOBAL: dict[str, int] = {"-maxdepth": 1}  # -mindepth would skip the pruning of hidden
FIND_ACTIONS = frozenset({"-print"})
FIND_REFUSED = {"-exec": RUNS, "-execdir": RUNS, "-ok": RUNS, "-okdir": RUNS, "-delete": WRITES,
                "-fprint": WRITES, "-fprint0": WRITES, "-fprintf": WRITES, "-fls": WRITES,
                "-L": FOLLOWS, "-H": FOLLOWS, "-follow": FOLLOWS, "-files0-from": READS,
                "-printf": "not needed", "-ls": "not needed",
                "-mindepth": "skips the pruning of hidden entries and lar's state",
                "-print0": "hides the names the output filter checks"}
