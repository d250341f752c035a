
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'retry' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'retry'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'retry' {
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Maximum number of tries, the first included; 0 means no limit')
            [CompletionResult]::new('--tries', '--tries', [CompletionResultType]::ParameterName, 'Maximum number of tries, the first included; 0 means no limit')
            [CompletionResult]::new('--consecutive', '--consecutive', [CompletionResultType]::ParameterName, 'Succeed only after N successful tries in a row; a failed try starts again from 0')
            [CompletionResult]::new('-B', '-B ', [CompletionResultType]::ParameterName, 'Wall-clock budget for the whole run, tries and waits together; 0 means none')
            [CompletionResult]::new('--budget', '--budget', [CompletionResultType]::ParameterName, 'Wall-clock budget for the whole run, tries and waits together; 0 means none')
            [CompletionResult]::new('--deadline', '--deadline', [CompletionResultType]::ParameterName, 'Absolute end of the run, in RFC 3339 (2026-01-15T08:05:00+07:00)')
            [CompletionResult]::new('--quota', '--quota', [CompletionResultType]::ParameterName, 'Share a retry quota with every run that names it: without a token, no retry')
            [CompletionResult]::new('--throttle', '--throttle', [CompletionResultType]::ParameterName, 'Hold tries back, first ones included, while the runs of --quota mostly fail')
            [CompletionResult]::new('--lock', '--lock', [CompletionResultType]::ParameterName, 'Run only while no other run holds the lock NAME on this machine, or on the fleet')
            [CompletionResult]::new('--lock-wait', '--lock-wait', [CompletionResultType]::ParameterName, 'Wait up to this long for the lock, then be turned away (default 0)')
            [CompletionResult]::new('--once', '--once', [CompletionResultType]::ParameterName, 'Run the command once for KEY: not again once a run of it succeeded')
            [CompletionResult]::new('--once-for', '--once-for', [CompletionResultType]::ParameterName, 'How long --once''s KEY stays done (default 24h)')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Stop a try that runs longer than this; 0 means no timeout')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Stop a try that runs longer than this; 0 means no timeout')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Signal sent to the try''s process group on timeout: a name, with or without SIG, or a number')
            [CompletionResult]::new('--signal', '--signal', [CompletionResultType]::ParameterName, 'Signal sent to the try''s process group on timeout: a name, with or without SIG, or a number')
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Grace period between that signal and SIGKILL; 0 kills at once')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace period between that signal and SIGKILL; 0 kills at once')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Base wait before the first retry')
            [CompletionResult]::new('--delay', '--delay', [CompletionResultType]::ParameterName, 'Base wait before the first retry')
            [CompletionResult]::new('--backoff', '--backoff', [CompletionResultType]::ParameterName, 'How the wait grows: exponential (delay × factor^(k−1)), linear (delay × k) or constant')
            [CompletionResult]::new('--factor', '--factor', [CompletionResultType]::ParameterName, 'Growth factor of exponential backoff, a number of at least 1')
            [CompletionResult]::new('-m', '-m', [CompletionResultType]::ParameterName, 'Cap on any single wait, jitter included')
            [CompletionResult]::new('--max-delay', '--max-delay', [CompletionResultType]::ParameterName, 'Cap on any single wait, jitter included')
            [CompletionResult]::new('--delay-from-output', '--delay-from-output', [CompletionResultType]::ParameterName, 'Wait at least as long as a failed try''s output asks, read from this regex''s first group')
            [CompletionResult]::new('--delays', '--delays', [CompletionResultType]::ParameterName, 'Explicit waits, such as 2s,4s,8s: the k-th retry waits the k-th value, the last repeats')
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]')
            [CompletionResult]::new('--jitter', '--jitter', [CompletionResultType]::ParameterName, 'Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed of the jitter''s random source: the same seed gives the same waits')
            [CompletionResult]::new('--stagger', '--stagger', [CompletionResultType]::ParameterName, 'Wait a random time up to this before the first try')
            [CompletionResult]::new('--retry-on', '--retry-on', [CompletionResultType]::ParameterName, 'Only these outcomes are transient; every other failure is permanent')
            [CompletionResult]::new('--stop-on', '--stop-on', [CompletionResultType]::ParameterName, 'These outcomes are permanent, even where --retry-on matches')
            [CompletionResult]::new('--success-on', '--success-on', [CompletionResultType]::ParameterName, 'Exit codes that count as success besides 0 (codes and ranges)')
            [CompletionResult]::new('--retry-if-output', '--retry-if-output', [CompletionResultType]::ParameterName, 'A failed try is transient only if its stdout or stderr matched this regular expression')
            [CompletionResult]::new('--stop-if-output', '--stop-if-output', [CompletionResultType]::ParameterName, 'A failed try is permanent if its stdout or stderr matched this regular expression')
            [CompletionResult]::new('--until-output', '--until-output', [CompletionResultType]::ParameterName, 'A success counts only if the try''s stdout or stderr matched this regular expression')
            [CompletionResult]::new('--stdin', '--stdin', [CompletionResultType]::ParameterName, 'Standard input of the tries: auto, replay, inherit or null')
            [CompletionResult]::new('--on-retry', '--on-retry', [CompletionResultType]::ParameterName, 'Shell command run (sh -c) before the wait that follows each failed try')
            [CompletionResult]::new('--on-give-up', '--on-give-up', [CompletionResultType]::ParameterName, 'Shell command run (sh -c) when the run gives up after a failed try, as --on-retry')
            [CompletionResult]::new('--dead-letter', '--dead-letter', [CompletionResultType]::ParameterName, 'When the run gives up, append it to FILE as one JSON line, to run it again with --replay')
            [CompletionResult]::new('--replay', '--replay', [CompletionResultType]::ParameterName, 'Run again, one after another, the runs of a --dead-letter FILE that are still pending')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'Format of the log: human, or json (one JSON object per line)')
            [CompletionResult]::new('--log-file', '--log-file', [CompletionResultType]::ParameterName, 'Append the log to this file instead of standard error')
            [CompletionResult]::new('--label', '--label', [CompletionResultType]::ParameterName, 'Name this run in the log (retry[NAME]: ...), the JSON log, CI annotations and summaries')
            [CompletionResult]::new('--junit', '--junit', [CompletionResultType]::ParameterName, 'When the run ends, write a JUnit XML report of it to FILE, for the CI to read')
            [CompletionResult]::new('--metrics', '--metrics', [CompletionResultType]::ParameterName, 'When the run ends, merge its metrics into FILE, for node_exporter''s textfile collector')
            [CompletionResult]::new('--pushgateway', '--pushgateway', [CompletionResultType]::ParameterName, 'When the run ends, push its metrics to the Prometheus Pushgateway at URL')
            [CompletionResult]::new('--ping', '--ping', [CompletionResultType]::ParameterName, 'Ping URL when the command first starts and when the run ends: a dead man''s switch')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'Colour the log: auto (when stderr is a terminal and NO_COLOR is unset), always, never')
            [CompletionResult]::new('--only', '--only', [CompletionResultType]::ParameterName, 'With --replay, run only the pending run with this id (a unique prefix of 8 or more characters will do); may be given again')
            [CompletionResult]::new('--only-label', '--only-label', [CompletionResultType]::ParameterName, 'With --replay, run only the pending runs whose --label matches this shell pattern (nightly-*)')
            [CompletionResult]::new('--forget', '--forget', [CompletionResultType]::ParameterName, 'Forget the pending runs of a --dead-letter FILE named by the ids that follow (or all): they are never replayed')
            [CompletionResult]::new('--prune', '--prune', [CompletionResultType]::ParameterName, 'Rewrite a --dead-letter or --history FILE without what is settled or older than --older-than')
            [CompletionResult]::new('--older-than', '--older-than', [CompletionResultType]::ParameterName, 'With --prune, which needs it, the age past which pending dead letters and history runs are dropped, as 30d or 12h; it has no default')
            [CompletionResult]::new('--flaky', '--flaky', [CompletionResultType]::ParameterName, 'What a run that succeeded only after a failed try exits with: pass, warn or fail')
            [CompletionResult]::new('--repeat', '--repeat', [CompletionResultType]::ParameterName, 'Run the command N times in a row to reproduce a flake; 0 runs until a try fails')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Append one JSON line for every run, whatever its end, for --stats to read')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Summarise a --history FILE: one row per label (else per command line), flakiest first')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'With --stats, count only the runs that ended this long ago or less (7d, 24h)')
            [CompletionResult]::new('--clients', '--clients', [CompletionResultType]::ParameterName, 'Number of simulated clients, from 1 to 1000000 [default: 100]')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'What the simulated clients retry against: outage or occ [default: outage]')
            [CompletionResult]::new('--outage', '--outage', [CompletionResultType]::ParameterName, 'How long every try fails, from the start (--model outage) [default: 10s]')
            [CompletionResult]::new('--capacity', '--capacity', [CompletionResultType]::ParameterName, 'Tries per second served after the outage; more fail as overload [default: no limit]')
            [CompletionResult]::new('--latency', '--latency', [CompletionResultType]::ParameterName, 'How long each simulated try takes (--model outage) [default: 100ms]')
            [CompletionResult]::new('--every', '--every', [CompletionResultType]::ParameterName, 'The clients arrive again this often, as a cron fleet does (--model outage) [default: once]')
            [CompletionResult]::new('--foreground', '--foreground', [CompletionResultType]::ParameterName, 'Keep the command in retry''s own process group')
            [CompletionResult]::new('--buffer-stdout', '--buffer-stdout', [CompletionResultType]::ParameterName, 'Hold each try''s standard output; only the successful try''s reaches stdout, once')
            [CompletionResult]::new('--output-on-failure', '--output-on-failure', [CompletionResultType]::ParameterName, 'Hold everything the run would print, and print it only if the run fails, as chronic does')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the final line when giving up, and nothing on success')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the final line when giving up, and nothing on success')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Add the command line, the policy, the seed and timestamps to the log')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Add the command line, the policy, the seed and timestamps to the log')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Print the schedule the options give, and run nothing')
            [CompletionResult]::new('--any-host', '--any-host', [CompletionResultType]::ParameterName, 'With --replay redis://..., take the pending runs of every machine, not only this one''s')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'With --replay FILE --dry-run, list the runs resolved or forgotten too, each with its state')
            [CompletionResult]::new('--keep-going', '--keep-going', [CompletionResultType]::ParameterName, 'With --repeat, run all N tries whatever fails, and report the failure rate')
            [CompletionResult]::new('--simulate', '--simulate', [CompletionResultType]::ParameterName, 'Simulate many clients following this policy at once, and run nothing')
            [CompletionResult]::new('--compare', '--compare', [CompletionResultType]::ParameterName, 'Simulate once per jitter kind, with and without --quota, and print the figures side by side')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
