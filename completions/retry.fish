# fish completion for retry.
# Generated from retry's command-line definition by tests/cli/docs.rs; do not edit.
# Install as retry.fish in a directory of $fish_complete_path, such as
# /usr/share/fish/vendor_completions.d/retry.fish.

# When the word at the cursor belongs to the wrapped command (after --, or at or after the first
# word that is neither an option nor the value of one), prints how many words before the command
# __fish_complete_subcommand is to skip, retry included; otherwise fails.
function __retry_command_skip
    set -l takes_value -n --tries --consecutive -B --budget --deadline --quota --throttle --lock --lock-wait --once --once-for -t --timeout -s --signal -k --kill-after -d --delay --backoff --factor -m --max-delay --delay-from-output --delays -j --jitter --seed --stagger --retry-on --stop-on --success-on --retry-if-output --stop-if-output --until-output --stdin --on-retry --on-give-up --dead-letter --replay --log-format --log-file --label --junit --metrics --pushgateway --ping --color --only --only-label --forget --prune --older-than --flaky --repeat --history --stats --since --clients --model --outage --capacity --latency --every
    set -l words (commandline -opc)
    set -e words[1]
    set -l skip 1
    set -l pending 0
    for w in $words
        if test $pending = 1
            set pending 0
        else if test "$w" = --
            echo $skip
            return 0
        else if string match -rq -- '^--.*=' $w
        else if string match -rq -- '^--.' $w
            contains -- $w $takes_value; and set pending 1
        else if string match -rq -- '^-.' $w
            # Short options together (-qn 3): the first that takes a value takes the rest.
            set -l len (string length -- $w)
            for j in (seq 2 $len)
                if contains -- -(string sub -s $j -l 1 -- $w) $takes_value
                    test $j = $len; and set pending 1
                    break
                end
            end
        else
            echo $skip
            return 0
        end
        # __fish_complete_subcommand passes over a word that starts with - or holds an =
        # without counting it.
        string match -q -- '-*' $w; or string match -q -- '*=*' $w; or set skip (math $skip + 1)
    end
    if test $pending = 0; and not string match -q -- '-*' (commandline -ct)
        echo $skip
        return 0
    end
    return 1
end

complete -c retry -n 'not __retry_command_skip >/dev/null' -s n -l tries -x -d 'Maximum number of tries, the first included; 0 means no limit'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l consecutive -x -d 'Succeed only after N successful tries in a row; a failed try starts again from 0'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s B -l budget -x -d 'Wall-clock budget for the whole run, tries and waits together; 0 means none'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l deadline -x -d 'Absolute end of the run, in RFC 3339 (2026-01-15T08:05:00+07:00)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l quota -x -d 'Share a retry quota with every run that names it: without a token, no retry'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l throttle -x -d 'Hold tries back, first ones included, while the runs of --quota mostly fail'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l lock -x -d 'Run only while no other run holds the lock NAME on this machine, or on the fleet'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l lock-wait -x -d 'Wait up to this long for the lock, then be turned away (default 0)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l once -x -d 'Run the command once for KEY: not again once a run of it succeeded'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l once-for -x -d 'How long --once\'s KEY stays done (default 24h)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s t -l timeout -x -d 'Stop a try that runs longer than this; 0 means no timeout'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s s -l signal -x -a 'HUP\\t INT\\t QUIT\\t ILL\\t TRAP\\t ABRT\\t BUS\\t FPE\\t KILL\\t USR1\\t SEGV\\t USR2\\t PIPE\\t ALRM\\t TERM\\t STKFLT\\t CHLD\\t CONT\\t STOP\\t TSTP\\t TTIN\\t TTOU\\t URG\\t XCPU\\t XFSZ\\t VTALRM\\t PROF\\t WINCH\\t IO\\t PWR\\t SYS\\t RTMIN\\t RTMIN+1\\t RTMIN+2\\t RTMIN+3\\t RTMIN+4\\t RTMIN+5\\t RTMIN+6\\t RTMIN+7\\t RTMIN+8\\t RTMIN+9\\t RTMIN+10\\t RTMIN+11\\t RTMIN+12\\t RTMIN+13\\t RTMIN+14\\t RTMIN+15\\t RTMAX-14\\t RTMAX-13\\t RTMAX-12\\t RTMAX-11\\t RTMAX-10\\t RTMAX-9\\t RTMAX-8\\t RTMAX-7\\t RTMAX-6\\t RTMAX-5\\t RTMAX-4\\t RTMAX-3\\t RTMAX-2\\t RTMAX-1\\t RTMAX\\t' -d 'Signal sent to the try\'s process group on timeout: a name, with or without SIG, or a number'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s k -l kill-after -x -d 'Grace period between that signal and SIGKILL; 0 kills at once'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l foreground -d 'Keep the command in retry\'s own process group'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s d -l delay -x -d 'Base wait before the first retry'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l backoff -x -a 'exponential\\t linear\\t constant\\t' -d 'How the wait grows: exponential (delay × factor^(k−1)), linear (delay × k) or constant'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l factor -x -d 'Growth factor of exponential backoff, a number of at least 1'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s m -l max-delay -x -d 'Cap on any single wait, jitter included'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l delay-from-output -x -d 'Wait at least as long as a failed try\'s output asks, read from this regex\'s first group'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l delays -x -d 'Explicit waits, such as 2s,4s,8s: the k-th retry waits the k-th value, the last repeats'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s j -l jitter -x -a 'full\\t equal\\t decorrelated\\t none\\t' -d 'Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l seed -x -d 'Seed of the jitter\'s random source: the same seed gives the same waits'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l stagger -x -d 'Wait a random time up to this before the first try'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l retry-on -x -d 'Only these outcomes are transient; every other failure is permanent'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l stop-on -x -d 'These outcomes are permanent, even where --retry-on matches'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l success-on -x -d 'Exit codes that count as success besides 0 (codes and ranges)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l retry-if-output -x -d 'A failed try is transient only if its stdout or stderr matched this regular expression'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l stop-if-output -x -d 'A failed try is permanent if its stdout or stderr matched this regular expression'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l until-output -x -d 'A success counts only if the try\'s stdout or stderr matched this regular expression'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l stdin -x -a 'auto\\t replay\\t inherit\\t null\\t' -d 'Standard input of the tries: auto, replay, inherit or null'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l buffer-stdout -d 'Hold each try\'s standard output; only the successful try\'s reaches stdout, once'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l output-on-failure -d 'Hold everything the run would print, and print it only if the run fails, as chronic does'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l on-retry -x -a '(__fish_complete_command)' -d 'Shell command run (sh -c) before the wait that follows each failed try'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l on-give-up -x -a '(__fish_complete_command)' -d 'Shell command run (sh -c) when the run gives up after a failed try, as --on-retry'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l dead-letter -r -F -d 'When the run gives up, append it to FILE as one JSON line, to run it again with --replay'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l replay -r -F -d 'Run again, one after another, the runs of a --dead-letter FILE that are still pending'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s q -l quiet -d 'Print only the final line when giving up, and nothing on success'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s v -l verbose -d 'Add the command line, the policy, the seed and timestamps to the log'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l log-format -x -a 'human\\t json\\t' -d 'Format of the log: human, or json (one JSON object per line)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l log-file -r -F -d 'Append the log to this file instead of standard error'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l label -x -d 'Name this run in the log (retry[NAME]: ...), the JSON log, CI annotations and summaries'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l junit -r -F -d 'When the run ends, write a JUnit XML report of it to FILE, for the CI to read'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l metrics -r -F -d 'When the run ends, merge its metrics into FILE, for node_exporter\'s textfile collector'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l pushgateway -x -d 'When the run ends, push its metrics to the Prometheus Pushgateway at URL'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l ping -x -d 'Ping URL when the command first starts and when the run ends: a dead man\'s switch'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l color -x -a 'auto\\t always\\t never\\t' -d 'Colour the log: auto (when stderr is a terminal and NO_COLOR is unset), always, never'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l dry-run -d 'Print the schedule the options give, and run nothing'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l only -x -d 'With --replay, run only the pending run with this id (a unique prefix of 8 or more characters will do); may be given again'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l only-label -x -d 'With --replay, run only the pending runs whose --label matches this shell pattern (nightly-*)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l any-host -d 'With --replay redis://..., take the pending runs of every machine, not only this one\'s'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l all -d 'With --replay FILE --dry-run, list the runs resolved or forgotten too, each with its state'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l forget -r -F -d 'Forget the pending runs of a --dead-letter FILE named by the ids that follow (or all): they are never replayed'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l prune -r -F -d 'Rewrite a --dead-letter or --history FILE without what is settled or older than --older-than'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l older-than -x -d 'With --prune, which needs it, the age past which pending dead letters and history runs are dropped, as 30d or 12h; it has no default'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l flaky -x -a 'pass\\t warn\\t fail\\t' -d 'What a run that succeeded only after a failed try exits with: pass, warn or fail'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l repeat -x -d 'Run the command N times in a row to reproduce a flake; 0 runs until a try fails'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l keep-going -d 'With --repeat, run all N tries whatever fails, and report the failure rate'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l history -r -F -d 'Append one JSON line for every run, whatever its end, for --stats to read'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l stats -r -F -d 'Summarise a --history FILE: one row per label (else per command line), flakiest first'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l since -x -d 'With --stats, count only the runs that ended this long ago or less (7d, 24h)'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l simulate -d 'Simulate many clients following this policy at once, and run nothing'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l clients -x -d 'Number of simulated clients, from 1 to 1000000 [default: 100]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l model -x -a 'outage\\t occ\\t' -d 'What the simulated clients retry against: outage or occ [default: outage]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l outage -x -d 'How long every try fails, from the start (--model outage) [default: 10s]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l capacity -x -d 'Tries per second served after the outage; more fail as overload [default: no limit]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l latency -x -d 'How long each simulated try takes (--model outage) [default: 100ms]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l every -x -d 'The clients arrive again this often, as a cron fleet does (--model outage) [default: once]'
complete -c retry -n 'not __retry_command_skip >/dev/null' -l compare -d 'Simulate once per jitter kind, with and without --quota, and print the figures side by side'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s h -l help -d 'Print help (see more with \'--help\')'
complete -c retry -n 'not __retry_command_skip >/dev/null' -s V -l version -d 'Print version'
complete -c retry -n '__retry_command_skip >/dev/null' -f \
    -a '(__fish_complete_subcommand --fcs-skip=(__retry_command_skip))'
