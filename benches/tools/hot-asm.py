#!/usr/bin/env python3
"""Shows the instructions of a callgrind dump (run with --dump-instr=yes) that executed at least
MIN times, with their counts, next to objdump's disassembly. For reading where instructions go in
code that is all inlined into one function.

usage: hot-asm.py BINARY CALLGRIND_DUMP [MIN]"""
import re, subprocess, sys
from collections import Counter

binary, dump = sys.argv[1], sys.argv[2]
minimum = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
counts = Counter()
addr = 0
for line in open(dump):
    # Cost lines: "ADDR LINE COUNT" with ADDR absolute (0x...), relative (+N/-N) or "*" (same).
    m = re.match(r'^(0x[0-9a-f]+|[+-]\d+|\*)\s+(\S+)\s+(\d+)\s*$', line)
    if not m or line.startswith(('calls=', 'jump=', 'jcnd=')):
        continue
    a = m.group(1)
    if a.startswith('0x'):
        addr = int(a, 16)
    elif a != '*':
        addr += int(a)
    counts[addr] += int(m.group(3))
hot = sorted(a for a, c in counts.items() if c >= minimum)
if not hot:
    sys.exit("no instruction above the threshold")
lo, hi = hot[0], hot[-1] + 16
asm = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', f'--start-address={lo:#x}',
                      f'--stop-address={hi:#x}', binary], capture_output=True, text=True).stdout
total = 0
for line in asm.splitlines():
    m = re.match(r'^\s*([0-9a-f]+):\s*(.*)$', line)
    if not m:
        continue
    a = int(m.group(1), 16)
    c = counts.get(a, 0)
    if c >= minimum:
        total += c
        print(f'{c:>10}  {a:#x}  {m.group(2)}')
print(f'{total:>10}  total shown')
