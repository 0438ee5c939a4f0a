"""Test-set generators of ``lar_evals.generate``: rare-term and paraphrase targets, Model2Vec word
neighbours, and the lexical verification of generated queries."""
