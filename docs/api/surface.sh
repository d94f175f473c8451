#!/usr/bin/env bash
# Counts keyway's public methods per type, read from the source: every `pub fn` (not
# `pub(crate)`) at method indent inside an inherent `impl` block of one of the types below,
# wherever the block is (Pool's methods are spread over several files by topic).
#
#   bash docs/api/surface.sh            # the table: per type, methods, submit-side, deprecated
#   bash docs/api/surface.sh --list     # every method, one a line: type, name, tags, file
#
# "submit-side" is a method that hands work to the pool or opens a way to (execute*, submit*,
# spawn*, send*, schedule*, try_execute, wait_for_room*, flush, lane, contexts, typed_lanes*, ask).
# A method under `#[deprecated]` is counted apart: it compiles, but is not part of the surface
# one learns.
set -euo pipefail
cd "$(dirname "$0")/../.."
types="Pool Contexts Lane TypedLanes TypedLane PoolBuilder Scheduler"
find crates/keyway/src -name '*.rs' | sort | xargs awk -v types="$types" -v list="${1:-}" '
BEGIN {
    n = split(types, t, " ")
    for (i = 1; i <= n; i++) wanted[t[i]] = 1
    submit = "^(execute|submit|spawn|send|schedule|try_execute|wait_for_room|typed_lanes)|^(flush|lane|contexts|ask)$"
}
FNR == 1 { current = ""; header = ""; deprecated = 0 }
# An inherent impl header at column 0, possibly spread over lines until "{" or "where".
/^impl[<[:space:]]/ { header = $0 }
header != "" && header !~ /\{|where/ && $0 !~ /^impl/ { header = header " " $0 }
header != "" && (header ~ /\{/ || header ~ /where/) {
    h = header; header = ""
    sub(/^impl/, "", h)
    # drop the impl generics <...> (balanced)
    if (substr(h, 1, 1) == "<") {
        depth = 0
        for (i = 1; i <= length(h); i++) {
            c = substr(h, i, 1)
            if (c == "<") depth++
            if (c == ">") { depth--; if (depth == 0) break }
        }
        h = substr(h, i + 1)
    }
    if (h ~ /[[:space:]]for[[:space:]]/) { current = ""; next }   # a trait impl
    gsub(/^[[:space:]]+/, "", h)
    match(h, /^[A-Za-z_][A-Za-z0-9_]*/)
    name = substr(h, RSTART, RLENGTH)
    current = (name in wanted) ? name : ""
    next
}
/^}/ { current = "" }
current != "" && /^    #\[deprecated/ { deprecated = 1 }
current != "" && /^    pub (async |unsafe |const )*fn / {
    line = $0
    sub(/^    pub (async |unsafe |const )*fn /, "", line)
    match(line, /^[A-Za-z_][A-Za-z0-9_]*/)
    m = substr(line, RSTART, RLENGTH)
    tag = (m ~ submit) ? "submit" : "other"
    if (deprecated) tag = tag ",deprecated"
    total[current]++
    if (deprecated) dep[current]++
    else if (m ~ submit) sub_n[current]++
    if (list != "") printf "%-12s %-40s %-18s %s\n", current, m, tag, FILENAME
    deprecated = 0
    next
}
current != "" && /^    [A-Za-z}]/ { deprecated = 0 }
END {
    if (list != "") exit
    printf "%-12s %8s %12s %11s\n", "type", "methods", "submit-side", "deprecated"
    for (i = 1; i <= n; i++) {
        k = t[i]
        printf "%-12s %8d %12d %11d\n", k, total[k] - dep[k], sub_n[k], dep[k]
        all += total[k] - dep[k]; alls += sub_n[k]; alld += dep[k]
    }
    printf "%-12s %8d %12d %11d\n", "all", all, alls, alld
}'
