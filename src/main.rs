use retry::exit::ExitStatus;
use retry::run::{main_with, signals::die_by};

fn main() {
    let status = main_with(std::env::args_os());
    if let ExitStatus::Reraise(signal) = status {
        die_by(signal);
    }
    std::process::exit(status.code());
}
