# written by mhar report; redraw with: gnuplot scaling_seq_mfu.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "scaling_seq_mfu.png"
set title "mhar bench --scaling: mfu (%) by sequence length"
set xlabel "sequence length T (4096 tokens a step)"
set ylabel "mfu (%)"
set grid
set key below
set logscale x 2
set xtics ("256" 256, "512" 512, "1024" 1024, "2048" 2048)
set xrange [170.667:3072]
plot "scaling_seq_mfu.dat" index 0 using 1:2 with lines lw 2 title "baseline", \
     "scaling_seq_mfu.dat" index 1 using 1:2 with lines lw 2 title "mhar"
