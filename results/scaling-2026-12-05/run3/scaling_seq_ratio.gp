# written by mhar report; redraw with: gnuplot scaling_seq_ratio.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "scaling_seq_ratio.png"
set title "mhar bench --scaling: mhar / baseline by sequence length"
set xlabel "sequence length T (4096 tokens a step)"
set ylabel "ratio"
set grid
set key below
set logscale x 2
set xtics ("256" 256, "512" 512, "1024" 1024, "2048" 2048)
set xrange [170.667:3072]
plot "scaling_seq_ratio.dat" index 0 using 1:2 with lines lw 2 title "tokens/s", \
     "scaling_seq_ratio.dat" index 1 using 1:2 with lines lw 2 title "peak memory", \
     1 with lines dashtype 2 lw 2 title "parity"
