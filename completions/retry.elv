
use builtin;
use str;

set edit:completion:arg-completer[retry] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'retry'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'retry'= {
            cand -n 'Maximum number of tries, the first included; 0 means no limit'
            cand --tries 'Maximum number of tries, the first included; 0 means no limit'
            cand --consecutive 'Succeed only after N successful tries in a row; a failed try starts again from 0'
            cand -B 'Wall-clock budget for the whole run, tries and waits together; 0 means none'
            cand --budget 'Wall-clock budget for the whole run, tries and waits together; 0 means none'
            cand --deadline 'Absolute end of the run, in RFC 3339 (2026-01-15T08:05:00+07:00)'
            cand --quota 'Share a retry quota with every run that names it: without a token, no retry'
            cand --throttle 'Hold tries back, first ones included, while the runs of --quota mostly fail'
            cand --lock 'Run only while no other run holds the lock NAME on this machine, or on the fleet'
            cand --lock-wait 'Wait up to this long for the lock, then be turned away (default 0)'
            cand --once 'Run the command once for KEY: not again once a run of it succeeded'
            cand --once-for 'How long --once''s KEY stays done (default 24h)'
            cand -t 'Stop a try that runs longer than this; 0 means no timeout'
            cand --timeout 'Stop a try that runs longer than this; 0 means no timeout'
            cand -s 'Signal sent to the try''s process group on timeout: a name, with or without SIG, or a number'
            cand --signal 'Signal sent to the try''s process group on timeout: a name, with or without SIG, or a number'
            cand -k 'Grace period between that signal and SIGKILL; 0 kills at once'
            cand --kill-after 'Grace period between that signal and SIGKILL; 0 kills at once'
            cand -d 'Base wait before the first retry'
            cand --delay 'Base wait before the first retry'
            cand --backoff 'How the wait grows: exponential (delay × factor^(k−1)), linear (delay × k) or constant'
            cand --factor 'Growth factor of exponential backoff, a number of at least 1'
            cand -m 'Cap on any single wait, jitter included'
            cand --max-delay 'Cap on any single wait, jitter included'
            cand --delay-from-output 'Wait at least as long as a failed try''s output asks, read from this regex''s first group'
            cand --delays 'Explicit waits, such as 2s,4s,8s: the k-th retry waits the k-th value, the last repeats'
            cand -j 'Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]'
            cand --jitter 'Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]'
            cand --seed 'Seed of the jitter''s random source: the same seed gives the same waits'
            cand --stagger 'Wait a random time up to this before the first try'
            cand --retry-on 'Only these outcomes are transient; every other failure is permanent'
            cand --stop-on 'These outcomes are permanent, even where --retry-on matches'
            cand --success-on 'Exit codes that count as success besides 0 (codes and ranges)'
            cand --retry-if-output 'A failed try is transient only if its stdout or stderr matched this regular expression'
            cand --stop-if-output 'A failed try is permanent if its stdout or stderr matched this regular expression'
            cand --until-output 'A success counts only if the try''s stdout or stderr matched this regular expression'
            cand --stdin 'Standard input of the tries: auto, replay, inherit or null'
            cand --on-retry 'Shell command run (sh -c) before the wait that follows each failed try'
            cand --on-give-up 'Shell command run (sh -c) when the run gives up after a failed try, as --on-retry'
            cand --dead-letter 'When the run gives up, append it to FILE as one JSON line, to run it again with --replay'
            cand --replay 'Run again, one after another, the runs of a --dead-letter FILE that are still pending'
            cand --log-format 'Format of the log: human, or json (one JSON object per line)'
            cand --log-file 'Append the log to this file instead of standard error'
            cand --label 'Name this run in the log (retry[NAME]: ...), the JSON log, CI annotations and summaries'
            cand --junit 'When the run ends, write a JUnit XML report of it to FILE, for the CI to read'
            cand --metrics 'When the run ends, merge its metrics into FILE, for node_exporter''s textfile collector'
            cand --pushgateway 'When the run ends, push its metrics to the Prometheus Pushgateway at URL'
            cand --ping 'Ping URL when the command first starts and when the run ends: a dead man''s switch'
            cand --color 'Colour the log: auto (when stderr is a terminal and NO_COLOR is unset), always, never'
            cand --only 'With --replay, run only the pending run with this id (a unique prefix of 8 or more characters will do); may be given again'
            cand --only-label 'With --replay, run only the pending runs whose --label matches this shell pattern (nightly-*)'
            cand --forget 'Forget the pending runs of a --dead-letter FILE named by the ids that follow (or all): they are never replayed'
            cand --prune 'Rewrite a --dead-letter or --history FILE without what is settled or older than --older-than'
            cand --older-than 'With --prune, which needs it, the age past which pending dead letters and history runs are dropped, as 30d or 12h; it has no default'
            cand --flaky 'What a run that succeeded only after a failed try exits with: pass, warn or fail'
            cand --repeat 'Run the command N times in a row to reproduce a flake; 0 runs until a try fails'
            cand --history 'Append one JSON line for every run, whatever its end, for --stats to read'
            cand --stats 'Summarise a --history FILE: one row per label (else per command line), flakiest first'
            cand --since 'With --stats, count only the runs that ended this long ago or less (7d, 24h)'
            cand --clients 'Number of simulated clients, from 1 to 1000000 [default: 100]'
            cand --model 'What the simulated clients retry against: outage or occ [default: outage]'
            cand --outage 'How long every try fails, from the start (--model outage) [default: 10s]'
            cand --capacity 'Tries per second served after the outage; more fail as overload [default: no limit]'
            cand --latency 'How long each simulated try takes (--model outage) [default: 100ms]'
            cand --every 'The clients arrive again this often, as a cron fleet does (--model outage) [default: once]'
            cand --foreground 'Keep the command in retry''s own process group'
            cand --buffer-stdout 'Hold each try''s standard output; only the successful try''s reaches stdout, once'
            cand --output-on-failure 'Hold everything the run would print, and print it only if the run fails, as chronic does'
            cand -q 'Print only the final line when giving up, and nothing on success'
            cand --quiet 'Print only the final line when giving up, and nothing on success'
            cand -v 'Add the command line, the policy, the seed and timestamps to the log'
            cand --verbose 'Add the command line, the policy, the seed and timestamps to the log'
            cand --dry-run 'Print the schedule the options give, and run nothing'
            cand --any-host 'With --replay redis://..., take the pending runs of every machine, not only this one''s'
            cand --all 'With --replay FILE --dry-run, list the runs resolved or forgotten too, each with its state'
            cand --keep-going 'With --repeat, run all N tries whatever fails, and report the failure rate'
            cand --simulate 'Simulate many clients following this policy at once, and run nothing'
            cand --compare 'Simulate once per jitter kind, with and without --quota, and print the figures side by side'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
    ]
    $completions[$command]
}
