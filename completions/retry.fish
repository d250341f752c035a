complete -c retry -s n -l tries -d 'Maximum number of tries, the first included; 0 means no limit' -r
complete -c retry -s B -l budget -d 'Wall-clock budget for the whole run, tries and waits together; 0 means none' -r
complete -c retry -l deadline -d 'Absolute end of the run, in RFC 3339 (2026-01-15T08:05:00+07:00)' -r
complete -c retry -s t -l timeout -d 'Stop a try that runs longer than this; 0 means no timeout' -r
complete -c retry -s s -l signal -d 'Signal sent to the try\'s process group on timeout: a name, with or without SIG, or a number' -r
complete -c retry -s k -l kill-after -d 'Grace period between that signal and SIGKILL; 0 kills at once' -r
complete -c retry -s d -l delay -d 'Base wait before the first retry' -r
complete -c retry -l backoff -d 'How the wait grows: exponential (delay × factor^(k−1)), linear (delay × k) or constant' -r -f -a "exponential\t''
linear\t''
constant\t''"
complete -c retry -l factor -d 'Growth factor of exponential backoff, a number of at least 1' -r
complete -c retry -s m -l max-delay -d 'Cap on any single wait, jitter included' -r
complete -c retry -l delays -d 'Explicit waits, such as 2s,4s,8s: the k-th retry waits the k-th value, the last repeats' -r
complete -c retry -s j -l jitter -d 'Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]' -r -f -a "full\t''
equal\t''
decorrelated\t''
none\t''"
complete -c retry -l seed -d 'Seed of the jitter\'s random source: the same seed gives the same waits' -r
complete -c retry -l retry-on -d 'Only these outcomes are transient; every other failure is permanent' -r
complete -c retry -l stop-on -d 'These outcomes are permanent, even where --retry-on matches' -r
complete -c retry -l success-on -d 'Exit codes that count as success besides 0 (codes and ranges)' -r
complete -c retry -l retry-if-output -d 'A failed try is transient only if its stdout or stderr matched this regular expression' -r
complete -c retry -l stop-if-output -d 'A failed try is permanent if its stdout or stderr matched this regular expression' -r
complete -c retry -l stdin -d 'Standard input of the tries: auto, replay, inherit or null' -r -f -a "auto\t''
replay\t''
inherit\t''
null\t''"
complete -c retry -l on-retry -d 'Shell command run (sh -c) before the wait that precedes each retry' -r
complete -c retry -l on-give-up -d 'Shell command run (sh -c) when the run gives up, as --on-retry' -r
complete -c retry -l log-format -d 'Format of the log: human, or json (one JSON object per line)' -r -f -a "human\t''
json\t''"
complete -c retry -l log-file -d 'Append the log to this file instead of standard error' -r -F
complete -c retry -l label -d 'Name this run in the log (retry[NAME]: ...), the JSON log, CI annotations and summaries' -r
complete -c retry -l color -d 'Colour the log: auto (when stderr is a terminal and NO_COLOR is unset), always, never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c retry -l foreground -d 'Keep the command in retry\'s own process group'
complete -c retry -l buffer-stdout -d 'Hold each try\'s standard output; only the successful try\'s reaches stdout, once'
complete -c retry -s q -l quiet -d 'Print only the final line when giving up, and nothing on success'
complete -c retry -s v -l verbose -d 'Add the command line, the policy, the seed and timestamps to the log'
complete -c retry -l dry-run -d 'Print the schedule the options give, and run nothing'
complete -c retry -s h -l help -d 'Print help (see more with \'--help\')'
complete -c retry -s V -l version -d 'Print version'
