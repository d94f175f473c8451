#!/usr/bin/env python3
"""Where keyway's workers were when they left the CPU (the open-loop tail study).

Reads `perf script -F comm,tid,trace,ip,sym` of a `perf record -e sched:sched_switch
--call-graph dwarf,8192` run and counts the switch-outs of keyway worker threads by state (R:
runnable, i.e. preempted or yielded; S: asleep) and by where the worker was, from its call chain:
`yield` (sched_yield), `park`, `IN-LANE` (running a lane: the lane is stalled until the worker
runs again), `idle` (the idle loop), `find_job`, `other`.
"""
import collections
import re
import sys

counts = collections.Counter()


def classify(block):
    m = re.search(r'prev_comm=(\S+) .*prev_state=(\S+)', block[0])
    if not m or not m.group(1).startswith('keyway-') or m.group(1) == 'keyway-monitor':
        return
    chain = ' '.join(block[1:])
    if 'sched_yield' in chain:
        where = 'yield'
    elif 'futex' in chain or 'park' in chain:
        where = 'park'
    elif 'run_batch' in chain or 'lane::' in chain:
        where = 'IN-LANE'
    elif 'idle' in chain or 'has_work' in chain:
        where = 'idle'
    elif 'find_job' in chain or 'steal' in chain:
        where = 'find_job'
    else:
        where = 'other'
    counts[(m.group(2), where)] += 1


block = []
for line in sys.stdin:
    if line.strip():
        block.append(line.strip())
    elif block:
        classify(block)
        block = []
if block:
    classify(block)
for (state, where), n in counts.most_common():
    print(f'{n:8d}  {state:3s} {where}')
