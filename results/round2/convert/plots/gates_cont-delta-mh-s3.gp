# written by mhar report; redraw with: gnuplot gates_cont-delta-mh-s3.gp
set terminal pngcairo noenhanced size 960,600 font ",11"
set output "gates_cont-delta-mh-s3.png"
set title "cont-delta-mh-s3: gate res_alpha per site"
set xlabel "step"
set ylabel "res_alpha"
set grid
set key outside right top
plot "gates_cont-delta-mh-s3.dat" index 0 using 1:2 with lines lw 2 title "layers.0.attn", \
     "gates_cont-delta-mh-s3.dat" index 1 using 1:2 with lines lw 2 title "layers.0.mlp", \
     "gates_cont-delta-mh-s3.dat" index 2 using 1:2 with lines lw 2 title "layers.1.attn", \
     "gates_cont-delta-mh-s3.dat" index 3 using 1:2 with lines lw 2 title "layers.1.mlp", \
     "gates_cont-delta-mh-s3.dat" index 4 using 1:2 with lines lw 2 title "layers.2.attn", \
     "gates_cont-delta-mh-s3.dat" index 5 using 1:2 with lines lw 2 title "layers.2.mlp", \
     "gates_cont-delta-mh-s3.dat" index 6 using 1:2 with lines lw 2 title "layers.3.attn", \
     "gates_cont-delta-mh-s3.dat" index 7 using 1:2 with lines lw 2 title "layers.3.mlp", \
     "gates_cont-delta-mh-s3.dat" index 8 using 1:2 with lines lw 2 dashtype 2 title "layers.4.attn", \
     "gates_cont-delta-mh-s3.dat" index 9 using 1:2 with lines lw 2 dashtype 2 title "layers.4.mlp", \
     "gates_cont-delta-mh-s3.dat" index 10 using 1:2 with lines lw 2 dashtype 2 title "layers.5.attn", \
     "gates_cont-delta-mh-s3.dat" index 11 using 1:2 with lines lw 2 dashtype 2 title "layers.5.mlp"
