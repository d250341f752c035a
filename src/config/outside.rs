//! `--pushgateway URL` and `--ping URL`: where a run tells the world outside how it went
//! (docs/dashboards.md). Each URL is `http://` or `https://` with a host and no user or
//! password; a `--ping` URL is a secret, and a refusal shows it as `http::shown` does.

use std::ffi::OsString;

use crate::http::{check_url, shown};
use crate::text::printable;

/// The URLs a run reports to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outside {
    /// `--pushgateway`: the Pushgateway's URL.
    pub pushgateway: Option<String>,
    /// `--ping`: the URL pinged when the run starts and ends; a secret.
    pub ping: Option<String>,
}

impl Outside {
    /// The URLs given, checked: a bad one is the usage error's line.
    pub fn of(pushgateway: Option<OsString>, ping: Option<OsString>) -> Result<Outside, String> {
        Ok(Outside {
            pushgateway: pushgateway
                .map(|url| checked("--pushgateway", url, printable))
                .transpose()?,
            ping: ping.map(|url| checked("--ping", url, shown)).transpose()?,
        })
    }

    /// Whether the run is reported anywhere outside.
    pub fn any(&self) -> bool {
        self.pushgateway.is_some() || self.ping.is_some()
    }
}

/// `url`, the value of `option`, if it is a URL a request can go to; else the line that says
/// why, with the value as `show` shows it.
fn checked(option: &str, url: OsString, show: impl Fn(&str) -> String) -> Result<String, String> {
    let bad =
        |value: &str, why: String| format!("invalid value '{value}' for '{option} <URL>': {why}");
    let url = url
        .into_string()
        .map_err(|raw| bad(&show(&raw.to_string_lossy()), "not UTF-8 text".into()))?;
    match check_url(&url) {
        Ok(()) => Ok(url),
        Err(why) => Err(bad(&show(&url), why.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pushgateway: Option<&str>, ping: Option<&str>) -> Result<Outside, String> {
        Outside::of(pushgateway.map(OsString::from), ping.map(OsString::from))
    }

    #[test]
    fn a_bad_url_is_one_line_naming_the_option_and_the_value() {
        assert_eq!(
            of(Some("notaurl"), None).unwrap_err(),
            "invalid value 'notaurl' for '--pushgateway <URL>': not an http:// or https:// URL"
        );
        assert_eq!(
            of(None, Some("ftp://x")).unwrap_err(),
            "invalid value 'ftp://x/…' for '--ping <URL>': the scheme ftp:// is not http:// or \
             https://"
        );
    }

    #[test]
    fn a_bad_ping_url_is_refused_without_its_path() {
        let e = of(None, Some("htps://hc-ping.com/0b2f7a10-secret")).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        let e = of(None, Some("https://user:secret@hc-ping.com/x")).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
    }
}
