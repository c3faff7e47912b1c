# The benchmark suite's plot (scripts/bench.sh): bandwidth and latency against message size,
# softrdma's perftest figures beside the kernel baselines, one line style per path.
#   gnuplot -e "dir='OUTDIR'; paths='loop veth'; lat=1; title='...'" tests/bench/bench_plot.gp
# reads OUTDIR/bw_PATH.dat and, with lat=1, OUTDIR/lat_PATH.dat (bench_suite.py writes them;
# --smoke measures no latency), writes OUTDIR/bench.png.

set terminal pngcairo size 1400,560 font ",10"
set output dir."/bench.png"
set multiplot layout 1,(lat ? 2 : 1) title title
set logscale x 2
set logscale y 10
set grid
set key top left font ",8"
set format x "%.0b%B"
set xlabel "message size (bytes)"
set datafile missing "?"
dash(p) = (p eq "loop") ? 1 : 2

set ylabel "bandwidth (MB/s, 10^6 B)"
set title "bandwidth"
plot for [p in paths] dir."/bw_".p.".dat" using 1:2 with linespoints dt dash(p) lc 1 title "ib\\_write\\_bw ".p, \
     for [p in paths] dir."/bw_".p.".dat" using 1:3 with linespoints dt dash(p) lc 2 title "ib\\_read\\_bw ".p, \
     for [p in paths] dir."/bw_".p.".dat" using 1:4 with linespoints dt dash(p) lc 3 title "ib\\_send\\_bw ".p, \
     for [p in paths] dir."/bw_".p.".dat" using 1:5 with linespoints dt dash(p) lc 8 lw 2 title "qperf tcp\\_bw ".p

if (lat) {
set ylabel "latency (us; READ and TCP: round trip)"
set title "latency"
set key top left
plot for [p in paths] dir."/lat_".p.".dat" using 1:2 with linespoints dt dash(p) lc 1 title "ib\\_send\\_lat ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:3 with linespoints dt dash(p) lc 2 title "ib\\_write\\_lat ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:4 with linespoints dt dash(p) lc 3 title "ib\\_read\\_lat ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:5 with linespoints dt dash(p) lc 8 lw 2 title "sockperf pp UDP ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:6 with linespoints dt dash(p) lc 7 title "qperf udp\\_lat ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:7 with linespoints dt dash(p) lc 4 title "qperf tcp\\_lat x2 ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:8 with linespoints dt dash(p) lc 6 lw 2 title "UDP busy-poll ".p, \
     for [p in paths] dir."/lat_".p.".dat" using 1:9 with linespoints dt dash(p) lc 5 lw 2 title "UDP sleeping ".p
}
unset multiplot
