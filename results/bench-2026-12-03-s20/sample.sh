#!/usr/bin/env bash
# sample.sh PATTERN OUT: poll the newest process matching PATTERN, record max RssAnon/RssFile and HWM
pat=$1; out=$2; : > $out
for _ in $(seq 600); do p=$(pgrep -nf "$pat") && break; sleep 0.02; done
[ -n "$p" ] || { echo "no process" > $out; exit; }
ma=0; mf=0; hwm=0; at=0
while [ -r /proc/$p/status ]; do
  read a f h t < <(awk '/^RssAnon/{a=$2}/^RssFile/{f=$2}/^VmHWM/{h=$2}/^Threads/{t=$2}END{print a,f,h,t}' /proc/$p/status 2>/dev/null) || break
  [ -n "$a" ] || break
  [ "$a" -gt "$ma" ] && ma=$a && at=$f
  [ "$f" -gt "$mf" ] && mf=$f
  hwm=$h; th=$t
  sleep 0.05
done
echo "pid $p maxAnon $ma (file then $at) maxFile $mf lastHWM $hwm threads $th" > $out
