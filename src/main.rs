use retry::exit::ExitStatus;
use retry::run::{main_with, signals::die_by};

fn main() {
    // A bug in retry is retry's own error (status 125), never a status the command could have
    // produced.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("retry: internal error: {info}");
        std::process::exit(ExitStatus::USAGE);
    }));
    let status = main_with(std::env::args_os());
    if let ExitStatus::Reraise(signal) = status {
        die_by(signal);
    }
    std::process::exit(status.code());
}
