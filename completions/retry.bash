# bash completion for retry                                -*- shell-script -*-
#
# Generated from retry's command-line definition by tests/cli/docs.rs; do not edit.
# Install as /usr/share/bash-completion/completions/retry, or source it from ~/.bashrc.
# Completing the wrapped command's own arguments takes bash-completion (its _command_offset);
# without it, the wrapped command's name and then file names are completed.

_retry() {
    local cur=${2-} i w j
    # The words of the line as retry sees them. Bash also splits at = and : (--jitter=full,
    # 08:05:00): join the words that no blank separates, and note where each starts.
    local -a words=() first=()
    local rest=$COMP_LINE cword=0 n=-1
    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
        if ((n < 0)) || [[ $rest == [[:space:]]* ]]; then
            n=$((n + 1))
            words[n]=${COMP_WORDS[i]}
            first[n]=$i
        else
            words[n]+=${COMP_WORDS[i]}
        fi
        rest=${rest#"${rest%%[![:space:]]*}"}
        rest=${rest#"${COMP_WORDS[i]}"}
        if ((i == COMP_CWORD)); then
            cword=$n
        fi
    done

    # Where the wrapped command starts: after --, or at the first word that is neither an
    # option nor the value of one. A value is the rest of its word (-n3, --tries=3) or the next.
    local takes_value=' -n --tries --consecutive -B --budget --deadline --quota --throttle --lock --lock-wait --once --once-for -t --timeout -s --signal -k --kill-after -d --delay --backoff --factor -m --max-delay --delay-from-output --delays -j --jitter --seed --stagger --retry-on --stop-on --success-on --retry-if-output --stop-if-output --until-output --stdin --on-retry --on-give-up --dead-letter --replay --log-format --log-file --label --junit --metrics --pushgateway --ping --color --only --only-label --forget --prune --older-than --flaky --repeat --history --stats --since --clients --model --outage --capacity --latency --every '
    local start=-1 option=
    for ((i = 1; i < cword; i++)); do
        w=${words[i]} option=
        case $w in
            --)
                start=$((i + 1))
                break
                ;;
            --*=*) ;;
            --?*)
                if [[ $takes_value == *" $w "* ]]; then
                    option=$w
                fi
                ;;
            -?*)
                for ((j = 1; j < ${#w}; j++)); do
                    if [[ $takes_value == *" -${w:j:1} "* ]]; then
                        if ((j == ${#w} - 1)); then
                            option=-${w:j:1}
                        fi
                        break
                    fi
                done
                ;;
            *)
                start=$i
                break
                ;;
        esac
        if [[ $option ]]; then
            i=$((i + 1))
        fi
    done
    # The word at the cursor is the value of $option only if that skipped past it.
    if ((i <= cword)); then
        option=
    fi

    w=${words[cword]}
    if ((start >= 0)); then
        _retry_command "${first[start]}"
    elif [[ $option ]]; then
        _retry_value "$option"
    elif [[ $w == --*=* ]]; then
        local prefix=
        if [[ $cur == --*=* ]]; then
            prefix=${cur%%=*}= cur=${cur#*=}
        fi
        _retry_value "${w%%=*}"
        if [[ $prefix ]]; then
            COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
        fi
    elif [[ $w == -* ]]; then
        COMPREPLY=($(compgen -W '-n --tries --consecutive -B --budget --deadline --quota --throttle --lock --lock-wait --once --once-for -t --timeout -s --signal -k --kill-after --foreground -d --delay --backoff --factor -m --max-delay --delay-from-output --delays -j --jitter --seed --stagger --retry-on --stop-on --success-on --retry-if-output --stop-if-output --until-output --stdin --buffer-stdout --output-on-failure --on-retry --on-give-up --dead-letter --replay -q --quiet -v --verbose --log-format --log-file --label --junit --metrics --pushgateway --ping --color --dry-run --only --only-label --any-host --all --forget --prune --older-than --flaky --repeat --keep-going --history --stats --since --simulate --clients --model --outage --capacity --latency --every --compare -h --help -V --version' -- "$cur"))
    else
        _retry_command "${first[cword]}"
    fi
}

# The values of option $1.
_retry_value() {
    COMPREPLY=()
    case $1 in
        -s | --signal)
            COMPREPLY=($(compgen -W 'HUP INT QUIT ILL TRAP ABRT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM STKFLT CHLD CONT STOP TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS RTMIN RTMIN+1 RTMIN+2 RTMIN+3 RTMIN+4 RTMIN+5 RTMIN+6 RTMIN+7 RTMIN+8 RTMIN+9 RTMIN+10 RTMIN+11 RTMIN+12 RTMIN+13 RTMIN+14 RTMIN+15 RTMAX-14 RTMAX-13 RTMAX-12 RTMAX-11 RTMAX-10 RTMAX-9 RTMAX-8 RTMAX-7 RTMAX-6 RTMAX-5 RTMAX-4 RTMAX-3 RTMAX-2 RTMAX-1 RTMAX' -- "$cur"))
            ;;
        --backoff)
            COMPREPLY=($(compgen -W 'exponential linear constant' -- "$cur"))
            ;;
        -j | --jitter)
            COMPREPLY=($(compgen -W 'full equal decorrelated none' -- "$cur"))
            ;;
        --stdin)
            COMPREPLY=($(compgen -W 'auto replay inherit null' -- "$cur"))
            ;;
        --on-retry)
            COMPREPLY=($(compgen -c -- "$cur"))
            ;;
        --on-give-up)
            COMPREPLY=($(compgen -c -- "$cur"))
            ;;
        --dead-letter)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --replay)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --log-format)
            COMPREPLY=($(compgen -W 'human json' -- "$cur"))
            ;;
        --log-file)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --junit)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --metrics)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --color)
            COMPREPLY=($(compgen -W 'auto always never' -- "$cur"))
            ;;
        --forget)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --prune)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --flaky)
            COMPREPLY=($(compgen -W 'pass warn fail' -- "$cur"))
            ;;
        --history)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --stats)
            compopt -o filenames 2>/dev/null
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        --model)
            COMPREPLY=($(compgen -W 'outage occ' -- "$cur"))
            ;;
    esac
}

# The wrapped command, from COMP_WORDS[$1] on: its name, then its own completion.
_retry_command() {
    if declare -F _comp_command_offset >/dev/null; then
        _comp_command_offset "$1"
    elif declare -F _command_offset >/dev/null; then
        _command_offset "$1"
    elif ((COMP_CWORD == $1)); then
        COMPREPLY=($(compgen -c -- "$cur"))
    else
        compopt -o default 2>/dev/null
        COMPREPLY=()
    fi
}

complete -F _retry retry
