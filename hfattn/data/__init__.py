"""Corpora and task data: the embedded Shakespeare plays, text files, Hub datasets."""
