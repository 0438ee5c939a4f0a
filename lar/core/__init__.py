"""The contracts: value types, errors, scope, timebox, the layer protocol and its base classes,
the layer registry. Depends on nothing else in lar."""
