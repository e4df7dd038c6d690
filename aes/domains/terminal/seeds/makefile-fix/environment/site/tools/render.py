"""render.py IN.txt OUT.html: first line is the title, blank lines separate paragraphs."""
import html
import sys

src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    lines = f.read().splitlines()
title, body = lines[0], "\n".join(lines[1:])
paragraphs = [p.strip() for p in body.split("\n\n") if p.strip()]
out = [f"<html><head><title>{html.escape(title)}</title></head><body>", f"<h1>{html.escape(title)}</h1>"]
out += [f"<p>{html.escape(' '.join(p.split()))}</p>" for p in paragraphs]
out.append("</body></html>")
with open(dst, "w") as f:
    f.write("\n".join(out) + "\n")
