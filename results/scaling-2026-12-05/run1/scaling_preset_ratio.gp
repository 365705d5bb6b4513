# written by mhar report; redraw with: gnuplot scaling_preset_ratio.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "scaling_preset_ratio.png"
set title "mhar bench --scaling: mhar / baseline by model size (B 8 x T 256)"
set xlabel "parameters (M)"
set ylabel "ratio"
set grid
set key below
set logscale x 2
set xtics ("2.2" 2.2, "8.4" 8.4, "23.8" 23.8, "42" 42, "386" 386)
set xrange [1.46667:579]
plot "scaling_preset_ratio.dat" index 0 using 1:2 with lines lw 2 title "tokens/s", \
     "scaling_preset_ratio.dat" index 1 using 1:2 with lines lw 2 title "peak memory", \
     1 with lines dashtype 2 lw 2 title "parity"
