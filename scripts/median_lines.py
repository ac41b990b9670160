#!/usr/bin/env python3
"""Merges several runs of one benchmark into one report line per result: lines whose text
is the same apart from the numbers are grouped, and each number that differs between runs
is replaced by the median over the runs, with the range in brackets. Numbers that agree
(labels like p50, counts) and lines seen once are kept as written.

    median_lines.py run1.txt run2.txt run3.txt
"""
import re
import statistics
import sys

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def decimals(token):
    return len(token.split(".")[1]) if "." in token else 0


def merge(lines):
    if len(lines) == 1 or len(set(lines)) == 1:
        return lines[0]
    tokens = [NUMBER.findall(line) for line in lines]
    parts = NUMBER.split(lines[0])
    out = [parts[0]]
    for position, tail in enumerate(parts[1:]):
        column = [t[position] for t in tokens]
        if len(set(column)) == 1:
            out.append(column[0] + tail)
            continue
        values = [float(t) for t in column]
        places = max(decimals(t) for t in column)
        fmt = f"{{:.{places}f}}"
        out.append(f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]" + tail)
    merged = "".join(out)
    # Table rows stay table rows; the report says once that figures are medians.
    return merged if merged.startswith("|") else merged + f"   (median of {len(lines)} runs)"


def main(paths):
    # The k-th line of a shape in one run goes with the k-th line of that shape in the
    # others (a benchmark printing one line per concurrency level keeps them apart).
    order, groups = [], {}
    for path in paths:
        seen = {}
        with open(path, encoding="utf-8") as run:
            for line in run.read().splitlines():
                if not line.strip():
                    continue
                shape = NUMBER.sub("#", line)
                key = (shape, seen.get(shape, 0))
                seen[shape] = key[1] + 1
                if key not in groups:
                    order.append(key)
                    groups[key] = []
                groups[key].append(line)
    for key in order:
        print(merge(groups[key]))


if __name__ == "__main__":
    main(sys.argv[1:])
