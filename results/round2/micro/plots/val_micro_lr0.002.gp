# written by mhar report; redraw with: gnuplot val_micro_lr0.002.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "val_micro_lr0.002.png"
set title "validation loss, mean over seeds (preset micro, lr 0.002)"
set xlabel "step"
set ylabel "validation loss (nats/token)"
set grid
set key outside right top
plot "val_micro_lr0.002.dat" index 0 using 1:2 with lines lw 2 title "baseline", \
     "val_micro_lr0.002.dat" index 1 using 1:2 with lines lw 2 title "mhar-h2", \
     "val_micro_lr0.002.dat" index 2 using 1:2 with lines lw 2 title "mhar-h4", \
     "val_micro_lr0.002.dat" index 3 using 1:2 with lines lw 2 title "mhar-h8", \
     "val_micro_lr0.002.dat" index 4 using 1:2 with lines lw 2 title "mhar-h16"
