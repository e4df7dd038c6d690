"""Prints a summary of scores.txt using gradebook.py."""
from pathlib import Path

import gradebook

pairs = gradebook.parse_scores(Path(__file__).with_name("scores.txt").read_text())
scores = [s for _, s in pairs]
print("students:", len(pairs))
print("average:", round(gradebook.average(scores), 2))
print("median:", gradebook.median(scores))
print("top 3:", gradebook.top_n(pairs, 3))
print("grades:", gradebook.histogram(pairs))
