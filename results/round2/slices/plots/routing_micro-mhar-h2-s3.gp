# written by mhar report; redraw with: gnuplot routing_micro-mhar-h2-s3.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "routing_micro-mhar-h2-s3.png"
set title "micro-mhar-h2-s3: read entropy / ln n per site, mean over heads"
set xlabel "step"
set ylabel "entropy / ln n"
set grid
set key outside right top
plot "routing_micro-mhar-h2-s3.dat" index 0 using 1:2 with lines lw 2 title "layers.0.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 1 using 1:2 with lines lw 2 title "layers.1.attn", \
     "routing_micro-mhar-h2-s3.dat" index 2 using 1:2 with lines lw 2 title "layers.1.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 3 using 1:2 with lines lw 2 title "layers.2.attn", \
     "routing_micro-mhar-h2-s3.dat" index 4 using 1:2 with lines lw 2 title "layers.2.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 5 using 1:2 with lines lw 2 title "layers.3.attn", \
     "routing_micro-mhar-h2-s3.dat" index 6 using 1:2 with lines lw 2 title "layers.3.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 7 using 1:2 with lines lw 2 title "layers.4.attn", \
     "routing_micro-mhar-h2-s3.dat" index 8 using 1:2 with lines lw 2 dashtype 2 title "layers.4.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 9 using 1:2 with lines lw 2 dashtype 2 title "layers.5.attn", \
     "routing_micro-mhar-h2-s3.dat" index 10 using 1:2 with lines lw 2 dashtype 2 title "layers.5.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 11 using 1:2 with lines lw 2 dashtype 2 title "layers.6.attn", \
     "routing_micro-mhar-h2-s3.dat" index 12 using 1:2 with lines lw 2 dashtype 2 title "layers.6.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 13 using 1:2 with lines lw 2 dashtype 2 title "layers.7.attn", \
     "routing_micro-mhar-h2-s3.dat" index 14 using 1:2 with lines lw 2 dashtype 2 title "layers.7.mlp", \
     "routing_micro-mhar-h2-s3.dat" index 15 using 1:2 with lines lw 2 dashtype 2 title "final"
