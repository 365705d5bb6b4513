# written by mhar report; redraw with: gnuplot slices.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "slices.png"
set title "paired difference to baseline (mean of the last 11 evals, each at its best lr) against slice width d/H"
set xlabel "slice width d/H (coordinates a head reads)"
set ylabel "method - baseline, same seed (nats/token)"
set grid
set key below
set logscale x 2
set xtics ("128" 128, "32" 32, "16" 16, "256" 256, "64" 64)
set xrange [10.6667:384]
plot "slices.dat" index 0 using 1:2:3 with yerrorlines lw 2 pt 7 title "nano", \
     "slices.dat" index 1 using 1:2:3 with yerrorlines lw 2 pt 7 title "micro", \
     0 with lines dashtype 2 lw 2 title "baseline"
