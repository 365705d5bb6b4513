# written by mhar report; redraw with: gnuplot heads_micro_lr0.002.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "heads_micro_lr0.002.png"
set title "val loss (mean of the last 11 evals) against routing heads H, preset micro, lr 0.002"
set xlabel "routing heads H"
set ylabel "validation loss (nats/token)"
set grid
set key below
set logscale x 2
set xtics ("2" 2, "4" 4, "8" 8, "16" 16)
set xrange [1.33333:24]
plot "heads_micro_lr0.002.dat" index 0 using 1:2:3 with yerrorlines lw 2 pt 7 title "MHAR (H = 1: attnres), mean ± sd over seeds", \
     "heads_micro_lr0.002.dat" index 1 using 1:2 with lines lw 2 title "mean on the seeds every H has", \
     3.098453909 with lines dashtype 2 lw 2 title "baseline"
