# written by mhar report; redraw with: gnuplot heads_nano.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "heads_nano.png"
set title "val loss (mean of the last 11 evals) against routing heads H, preset nano"
set xlabel "routing heads H"
set ylabel "validation loss (nats/token)"
set grid
set key below
set logscale x 2
set xtics ("1" 1, "2" 2, "4" 4, "8" 8, "16" 16)
set xrange [0.666667:24]
plot "heads_nano.dat" index 0 using 1:2:3 with yerrorlines lw 2 pt 7 title "MHAR (H = 1: attnres), mean ± sd over seeds", \
     "heads_nano.dat" index 1 using 1:2 with lines lw 2 title "mean on the seeds every H has", \
     3.175918818 with lines dashtype 2 lw 2 title "baseline", \
     2.980393727 with lines dashtype 2 lw 2 title "hc"
