# written by mhar report; redraw with: gnuplot val_micro_lr0.008.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "val_micro_lr0.008.png"
set title "validation loss, mean over seeds (preset micro, lr 0.008)"
set xlabel "step"
set ylabel "validation loss (nats/token)"
set grid
set key outside right top
plot "val_micro_lr0.008.dat" index 0 using 1:2 with lines lw 2 title "hc"
