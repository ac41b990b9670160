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
    if len(lines) == 1:
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
    return "".join(out) + f"   (median of {len(lines)} runs)"


def main(paths):
    order, groups = [], {}
    for path in paths:
        with open(path, encoding="utf-8") as run:
            for line in run.read().splitlines():
                if not line.strip():
                    continue
                key = NUMBER.sub("#", line)
                if key not in groups:
                    order.append(key)
                    groups[key] = []
                groups[key].append(line)
    for key in order:
        print(merge(groups[key]))


if __name__ == "__main__":
    main(sys.argv[1:])
