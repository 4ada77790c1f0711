#!/usr/bin/env bash
#
# chart.sh - renders bench/run.sh's table as an SVG bar chart of gmprt
# against its peer, one bar per row, on a log axis with 1.0 marked.
#
# Usage: bench/chart.sh [TABLE] > chart.svg
#   TABLE  a file holding run.sh's output (stdin when absent); only the
#          rows of its markdown table are read.
#
# Each bar is gmprt's cost relative to the peer: the table's gmprt/peer
# ratio where lower is better, and its inverse where higher is better
# (speedup and every per-second unit), so that a bar left of 1.0 is
# always a row gmprt wins, and the axis says so. Rows without a ratio
# ('-') are left out. Needs bash and awk only.

set -u
awk '
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); return s }
function lg(v) { return log(v) / log(10) }
BEGIN { FS = "|"; n = 0 }
/^\| *case *\|/ { next }
/^\|---/ { next }
/^\|/ {
    for (i = 2; i <= 7; i++) { f[i] = $i; gsub(/^ +| +$/, "", f[i]) }
    r = f[7]
    if (r == "-" || r + 0 <= 0) next
    unit = f[4]
    higher = (unit == "speedup" || unit ~ /\/s$/)
    n++
    label[n] = f[2] " " f[3] " " unit
    sub(/ \(Go column: Boost.Context\)/, " (Boost)", label[n])
    sub(/ \(Go column: net\/http\)/, " vs net/http", label[n])
    val[n] = higher ? 1 / r : r
}
END {
    if (n == 0) { print "chart.sh: no table rows with a ratio" > "/dev/stderr"; exit 1 }
    lo = -2; hi = 1                 # the axis: 0.01 .. 10
    left = 300; width = 440; rowh = 18; top = 50
    h = top + n * rowh + 50
    W = left + width + 70
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, h
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    printf "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">gmprt / Go, cost ratio (log scale)</text>\n", left
    x1 = left + (0 - lo) / (hi - lo) * width
    printf "<text x=\"%d\" y=\"38\" text-anchor=\"end\" fill=\"#1a7f37\">&#8592; gmprt better</text>\n", x1 - 6
    printf "<text x=\"%d\" y=\"38\" fill=\"#b42318\">Go better &#8594;</text>\n", x1 + 6
    for (e = lo; e <= hi; e++) {
        x = left + (e - lo) / (hi - lo) * width
        printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, top - 4, x, top + n * rowh
        printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", x, top + n * rowh + 16, (e == 0 ? "1.0" : 10 ^ e)
    }
    for (i = 1; i <= n; i++) {
        y = top + (i - 1) * rowh
        v = val[i]; if (v < 10 ^ lo) v = 10 ^ lo; if (v > 10 ^ hi) v = 10 ^ hi
        xv = left + (lg(v) - lo) / (hi - lo) * width
        a = xv < x1 ? xv : x1; b = xv < x1 ? x1 : xv
        col = val[i] <= 1 ? "#2da44e" : "#d1242f"
        printf "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", left - 8, y + 13, esc(label[i])
        printf "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", a, y + 3, (b - a < 1 ? 1 : b - a), rowh - 6, col
        printf "<text x=\"%.1f\" y=\"%d\" fill=\"#333\">%.2f</text>\n", (xv < x1 ? x1 : xv) + 4, y + 13, val[i]
    }
    printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" stroke-width=\"1.5\"/>\n", x1, top - 4, x1, top + n * rowh
    printf "<text x=\"%d\" y=\"%d\" fill=\"#555\">Rows where more is better (speedup, per second) are drawn inverted, Go / gmprt.</text>\n", 10, h - 10
    print "</svg>"
}' "${1:-/dev/stdin}"
