# written by mhar report; redraw with: gnuplot val_nano.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "val_nano.png"
set title "validation loss, mean over seeds (preset nano)"
set xlabel "step"
set ylabel "validation loss (nats/token)"
set grid
set key outside right top
plot "val_nano.dat" index 0 using 1:2 with lines lw 2 title "baseline", \
     "val_nano.dat" index 1 using 1:2 with lines lw 2 title "delta_mh-h8-b3"
