#!/usr/bin/env bash
# Pause the training runs (SIGSTOP; they resume bit-identically), bench on idle cores, resume.
cd /work/main
P=$(pgrep -f '[m]har train' | tr '\n' ' ')
trap 'kill -CONT $P 2>/dev/null' EXIT
[ -n "$P" ] && kill -STOP $P
sleep 2
out=/work/bench-0702
for i in 1 2 3; do
  ./mhar bench --preset micro --residual baseline,mhar,attnres,block --steps 3 --repeat 3 > $out/micro-r3-run$i.txt 2> $out/micro-r3-run$i.err
done
for i in 1 2 3; do
  ./mhar bench --preset 100m --batch 4 --seq 512 --residual baseline,mhar,attnres,block --steps 2 --repeat 3 > $out/100m-r3-run$i.txt 2> $out/100m-r3-run$i.err
done
date > $out/done
