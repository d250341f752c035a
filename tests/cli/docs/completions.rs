//! The bash, zsh and fish completions, from the clap definition: `retry`'s own options and
//! their values until the wrapped command starts (after `--` or at the first word that is not
//! an option or an option's value), then the wrapped command's name, then whatever that
//! command's own completion offers.

use std::fmt::Write as _;

use clap::builder::ValueHint;
use clap::{Arg, Command};
use retry::policy::Signal;

/// One option of `retry`, as a completion sees it.
pub struct Opt {
    pub short: Option<char>,
    pub long: Option<String>,
    /// The short help (`-h`), on one line.
    pub help: String,
    /// What the option's value is; `None` for a flag.
    pub value: Option<Value>,
    /// The options it cannot be given with, itself included.
    pub excludes: Vec<String>,
}

pub enum Value {
    /// One of a fixed set.
    Choices(Vec<String>),
    /// A signal: `--signal`, whose value name is SIGNAL.
    Signal,
    /// A file name.
    Path,
    /// A shell command line, such as `--on-retry`'s (value name CMD).
    ShellCommand,
    /// Anything else (a number, a duration, a list), named as `--help` names it.
    Other(String),
}

impl Opt {
    /// `-n` and `--tries`, the forms it is written in.
    pub fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        names.extend(self.short.map(|s| format!("-{s}")));
        names.extend(self.long.as_ref().map(|l| format!("--{l}")));
        names
    }
}

/// Every option, --help and --version included, in the order of `--help`.
pub fn options(command: &Command) -> Vec<Opt> {
    let mut cmd = command.clone();
    cmd.build();
    let names = |arg: &Arg| {
        let mut names = Vec::new();
        names.extend(arg.get_short().map(|s| format!("-{s}")));
        names.extend(arg.get_long().map(|l| format!("--{l}")));
        names
    };
    cmd.get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .map(|arg| {
            let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
            let value_name = arg
                .get_value_names()
                .and_then(|n| n.first())
                .map_or_else(|| "VALUE".to_string(), ToString::to_string);
            let choices: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            let value = takes_value.then(|| match arg.get_value_hint() {
                _ if !choices.is_empty() => Value::Choices(choices),
                _ if value_name == "SIGNAL" => Value::Signal,
                ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath => Value::Path,
                ValueHint::CommandString => Value::ShellCommand,
                _ if value_name == "CMD" => Value::ShellCommand,
                _ => Value::Other(value_name),
            });
            let mut excludes = names(arg);
            for other in cmd.get_arg_conflicts_with(arg) {
                excludes.extend(names(other));
            }
            Opt {
                short: arg.get_short(),
                long: arg.get_long().map(str::to_string),
                help: arg
                    .get_help()
                    .map(|h| h.to_string())
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                value,
                excludes,
            }
        })
        .collect()
}

/// The signal names `--signal` takes, without `SIG`, in the order of their numbers.
pub fn signal_names() -> Vec<String> {
    Signal::all()
        .map(Signal::name)
        .filter(|name| !name.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

/// The options that take a value, in every form they are written in.
fn with_value(opts: &[Opt]) -> Vec<String> {
    opts.iter()
        .filter(|o| o.value.is_some())
        .flat_map(Opt::names)
        .collect()
}

const HEADER: &str =
    "Generated from retry's command-line definition by tests/cli/docs.rs; do not edit.";

pub fn bash(command: &Command) -> String {
    let opts = options(command);
    let all: Vec<String> = opts.iter().flat_map(Opt::names).collect();
    let mut values = String::new();
    for opt in &opts {
        let Some(value) = &opt.value else { continue };
        let action = match value {
            Value::Choices(choices) => {
                format!(
                    "COMPREPLY=($(compgen -W '{}' -- \"$cur\"))",
                    choices.join(" ")
                )
            }
            Value::Signal => format!(
                "COMPREPLY=($(compgen -W '{}' -- \"$cur\"))",
                signal_names().join(" ")
            ),
            Value::Path => "compopt -o filenames 2>/dev/null\n            \
                 local IFS=$'\\n'\n            \
                 COMPREPLY=($(compgen -f -- \"$cur\"))"
                .to_string(),
            Value::ShellCommand => "COMPREPLY=($(compgen -c -- \"$cur\"))".to_string(),
            Value::Other(_) => continue,
        };
        let _ = write!(
            values,
            "        {})\n            {action}\n            ;;\n",
            opt.names().join(" | ")
        );
    }
    format!(
        r#"# bash completion for retry                                -*- shell-script -*-
#
# {HEADER}
# Install as /usr/share/bash-completion/completions/retry, or source it from ~/.bashrc.
# Completing the wrapped command's own arguments takes bash-completion (its _command_offset);
# without it, the wrapped command's name and then file names are completed.

_retry() {{
    local cur=${{2-}} i w j
    # The words of the line as retry sees them. Bash also splits at = and : (--jitter=full,
    # 08:05:00): join the words that no blank separates, and note where each starts.
    local -a words=() first=()
    local rest=$COMP_LINE cword=0 n=-1
    for ((i = 0; i < ${{#COMP_WORDS[@]}}; i++)); do
        if ((n < 0)) || [[ $rest == [[:space:]]* ]]; then
            n=$((n + 1))
            words[n]=${{COMP_WORDS[i]}}
            first[n]=$i
        else
            words[n]+=${{COMP_WORDS[i]}}
        fi
        rest=${{rest#"${{rest%%[![:space:]]*}}"}}
        rest=${{rest#"${{COMP_WORDS[i]}}"}}
        if ((i == COMP_CWORD)); then
            cword=$n
        fi
    done

    # Where the wrapped command starts: after --, or at the first word that is neither an
    # option nor the value of one. A value is the rest of its word (-n3, --tries=3) or the next.
    local takes_value=' {takes_value} '
    local start=-1 option=
    for ((i = 1; i < cword; i++)); do
        w=${{words[i]}} option=
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
                for ((j = 1; j < ${{#w}}; j++)); do
                    if [[ $takes_value == *" -${{w:j:1}} "* ]]; then
                        if ((j == ${{#w}} - 1)); then
                            option=-${{w:j:1}}
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

    w=${{words[cword]}}
    if ((start >= 0)); then
        _retry_command "${{first[start]}}"
    elif [[ $option ]]; then
        _retry_value "$option"
    elif [[ $w == --*=* ]]; then
        local prefix=
        if [[ $cur == --*=* ]]; then
            prefix=${{cur%%=*}}= cur=${{cur#*=}}
        fi
        _retry_value "${{w%%=*}}"
        if [[ $prefix ]]; then
            COMPREPLY=("${{COMPREPLY[@]/#/$prefix}}")
        fi
    elif [[ $w == -* ]]; then
        COMPREPLY=($(compgen -W '{all}' -- "$cur"))
    else
        _retry_command "${{first[cword]}}"
    fi
}}

# The values of option $1.
_retry_value() {{
    COMPREPLY=()
    case $1 in
{values}    esac
}}

# The wrapped command, from COMP_WORDS[$1] on: its name, then its own completion.
_retry_command() {{
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
}}

complete -F _retry retry
"#,
        takes_value = with_value(&opts).join(" "),
        all = all.join(" "),
    )
}

/// Escapes text for a single-quoted zsh word that `_arguments` reads as a description.
fn zsh_help(help: &str) -> String {
    let mut out = String::new();
    for c in help.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '\\' | '[' | ']' | ':' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

pub fn zsh(command: &Command) -> String {
    let opts = options(command);
    let mut specs = String::new();
    for opt in &opts {
        let names = opt.names();
        let exclusion = format!("({})", opt.excludes.join(" "));
        let (short_suffix, long_suffix) = match opt.value {
            Some(_) => ("+", "="),
            None => ("", ""),
        };
        let forms: Vec<String> = opt
            .short
            .map(|s| format!("-{s}{short_suffix}"))
            .into_iter()
            .chain(opt.long.as_ref().map(|l| format!("--{l}{long_suffix}")))
            .collect();
        let forms = if forms.len() > 1 {
            format!("{{{}}}", forms.join(","))
        } else {
            forms.concat()
        };
        let value = match &opt.value {
            None => String::new(),
            Some(Value::Choices(choices)) => {
                format!(":{}:({})", value_name(opt), choices.join(" "))
            }
            Some(Value::Signal) => format!(":signal:({})", signal_names().join(" ")),
            Some(Value::Path) => ":file:_files".to_string(),
            Some(Value::ShellCommand) => ":shell command:_cmdstring".to_string(),
            Some(Value::Other(name)) => format!(":{name}: "),
        };
        let _ = writeln!(
            specs,
            "        '{exclusion}'{forms}'[{}]{value}' \\",
            zsh_help(&opt.help)
        );
        debug_assert!(!names.is_empty());
    }
    format!(
        r#"#compdef retry
#
# zsh completion for retry.
# {HEADER}
# Install as _retry in a directory of $fpath, such as /usr/share/zsh/site-functions/_retry
# (/usr/local/share/zsh/site-functions/_retry for a local install).

_retry() {{
    # -S: -- ends the options; -A '-*': so does the first word that is not one (the command).
    _arguments -s -S -A '-*' : \
{specs}        '(-)1:command:_command_names -e' \
        '*::argument:_retry_command'
}}

# The wrapped command and its arguments, as that command's own completion has them.
_retry_command() {{
    # _arguments counts a -- that comes first as a normal argument.
    if [[ $words[1] == -- ]]; then
        shift words
        (( CURRENT-- ))
    fi
    _normal
}}

if [ "$funcstack[1]" = "_retry" ]; then
    _retry "$@"
else
    compdef _retry retry
fi
"#
    )
}

fn value_name(opt: &Opt) -> String {
    match opt.long.as_deref() {
        Some(long) => long.replace('-', " "),
        None => "value".to_string(),
    }
}

/// Escapes text for a single-quoted fish word.
fn fish_quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

pub fn fish(command: &Command) -> String {
    let opts = options(command);
    let takes_value = with_value(&opts).join(" ");
    let mut rules = String::new();
    for opt in &opts {
        let mut rule = "complete -c retry -n 'not __retry_command_skip >/dev/null'".to_string();
        if let Some(short) = opt.short {
            let _ = write!(rule, " -s {short}");
        }
        if let Some(long) = &opt.long {
            let _ = write!(rule, " -l {long}");
        }
        // A value followed by an empty description, so that fish does not show the option's.
        let values = |values: &[String]| {
            let values: Vec<String> = values.iter().map(|v| format!("{v}\\t")).collect();
            fish_quote(&values.join(" "))
        };
        match &opt.value {
            None => {}
            Some(Value::Choices(choices)) => {
                let _ = write!(rule, " -x -a {}", values(choices));
            }
            Some(Value::Signal) => {
                let _ = write!(rule, " -x -a {}", values(&signal_names()));
            }
            Some(Value::Path) => rule.push_str(" -r -F"),
            Some(Value::ShellCommand) => rule.push_str(" -x -a '(__fish_complete_command)'"),
            Some(Value::Other(_)) => rule.push_str(" -x"),
        }
        let _ = writeln!(rule, " -d {}", fish_quote(&opt.help));
        rules.push_str(&rule);
    }
    format!(
        r#"# fish completion for retry.
# {HEADER}
# Install as retry.fish in a directory of $fish_complete_path, such as
# /usr/share/fish/vendor_completions.d/retry.fish.

# When the word at the cursor belongs to the wrapped command (after --, or at or after the first
# word that is neither an option nor the value of one), prints how many words before the command
# __fish_complete_subcommand is to skip, retry included; otherwise fails.
function __retry_command_skip
    set -l takes_value {takes_value}
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

{rules}complete -c retry -n '__retry_command_skip >/dev/null' -f \
    -a '(__fish_complete_subcommand --fcs-skip=(__retry_command_skip))'
"#
    )
}
