# ports.sh - sourced by bench/run.sh and bench/smoke_servers.sh.

# free_port: a random TCP port in 20000..32767 (below Linux's ephemeral
# range) that no socket on this machine uses now, going by /proc/net/tcp*.
free_port() {
    local used p i
    used=" $(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' \
             /proc/net/tcp /proc/net/tcp6 2>/dev/null | tr '\n' ' ') "
    for ((i = 0; i < 100; i++)); do
        p=$((20000 + RANDOM % 12768))
        case $used in *" $(printf '%04X' "$p") "*) continue ;; esac
        break
    done
    echo "$p"
}
