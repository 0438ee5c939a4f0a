"""Recording: traces of calls (JSONL), their replay, and the call log."""
