"""Data: sources → tokenizer → packed token file → DataModule."""
