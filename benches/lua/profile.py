"""Reads the line profile a redis-server built with line-profile.patch
wrote (LUAPROF: "line events cycles" a line of the library) and prints
where the library's time went: by function (the top-level function a line
is in) and the costliest lines, the harness appended to the library
(benches/lua/cycle.lua) left out. The hook's own cost per line event (the
least cycles per event of any line run often) is taken out of every line.

    python3 benches/lua/profile.py LIBRARY.lua PROFILE [WHOLE_PROFILE]

PROFILE may be the difference of two profiles (one call alone); then the
hook's cost is read off WHOLE_PROFILE, the larger of the two.
"""

import collections
import re
import sys

FUNCTIONS, LINES = 30, 40
HARNESS = "-- Appended to prioq's library"
DEFINITION = re.compile(
    r"^(?:local )?function ([\w.]+)|^redis\.register_function\(?'?(\w+)|^local (\w+) = function"
)


def owners(library):
    """The top-level function each line of the library is in."""
    owner, current = {}, "(load)"
    for number, line in enumerate(library, 1):
        match = DEFINITION.match(line)
        if match:
            current = next(name for name in match.groups() if name)
        owner[number] = current
    return owner


def read(path):
    return [tuple(map(int, row.split())) for row in open(path) if row.strip()]


def main():
    library = open(sys.argv[1]).read().split("\n")
    counts = read(sys.argv[2])
    whole = read(sys.argv[3]) if len(sys.argv) > 3 else counts
    hook = min(cycles / events for _, events, cycles in whole if events >= 1000)
    owner = owners(library)
    harness = next(n for n, line in enumerate(library, 1) if line.startswith(HARNESS))
    cost = {line: cycles - hook * events for line, events, cycles in counts if line < harness}
    total = sum(cost.values())
    by_function = collections.Counter()
    for line, spent in cost.items():
        by_function[owner.get(line, "?")] += spent
    print(f"{sum(e for _, e, _ in counts)} line events; the hook's {hook:.0f} cycles each taken out")
    print("share  function")
    for name, spent in by_function.most_common(FUNCTIONS):
        print(f"{100 * spent / total:5.1f}%  {name}")
    print("share  line  function: code")
    for line in sorted(cost, key=lambda n: -cost[n])[:LINES]:
        code = library[line - 1].strip()[:90] if line <= len(library) else ""
        print(f"{100 * cost[line] / total:5.1f}%  {line:4d}  {owner.get(line, '?')}: {code}")


if __name__ == "__main__":
    main()
