# written by mhar report; redraw with: gnuplot heads_delta_micro_lr0.002.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "heads_delta_micro_lr0.002.png"
set title "paired difference to baseline (mean of the last 11 evals) against H, preset micro, lr 0.002"
set xlabel "routing heads H"
set ylabel "method - baseline, same seed (nats/token)"
set grid
set key below
set logscale x 2
set xtics ("2" 2, "4" 4, "8" 8, "16" 16)
set xrange [1.33333:24]
plot "heads_delta_micro_lr0.002.dat" index 0 using 1:2:3 with yerrorlines lw 2 pt 7 title "MHAR (H = 1: attnres) - baseline, same seed: mean ± sd", \
     0 with lines dashtype 2 lw 2 title "baseline"
