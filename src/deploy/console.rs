//! Where deploy output goes: a terminal (indicatif spinners, one per stack operation, with the
//! event lines printed above them) or any writer (plain lines; CI logs, tests), and the y/N
//! confirmation.

use super::error::DeployError;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The deploy's output.
pub struct Console {
    inner: Inner,
}

enum Inner {
    Terminal(MultiProgress),
    Writer(Mutex<Box<dyn Write + Send>>),
}

/// Text written to a [`Console::capture`] console.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        match self.0.lock() {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(poisoned) => String::from_utf8_lossy(&poisoned.into_inner()).into_owned(),
        }
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut b) => b.extend_from_slice(buf),
            Err(poisoned) => poisoned.into_inner().extend_from_slice(buf),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Console {
    /// Standard output: spinners when it is a terminal, plain lines otherwise.
    pub fn stdout() -> Console {
        if std::io::stdout().is_terminal() {
            Console {
                inner: Inner::Terminal(MultiProgress::with_draw_target(
                    ProgressDrawTarget::stdout(),
                )),
            }
        } else {
            Console::plain(std::io::stdout())
        }
    }

    /// Plain lines to `writer`.
    pub fn plain(writer: impl Write + Send + 'static) -> Console {
        Console {
            inner: Inner::Writer(Mutex::new(Box::new(writer))),
        }
    }

    /// Plain lines kept in memory (tests, or a caller that shows them itself).
    pub fn capture() -> (Console, Captured) {
        let captured = Captured::default();
        (Console::plain(captured.clone()), captured)
    }

    /// Prints one line (or several, if `text` has newlines).
    pub fn line(&self, text: &str) {
        match &self.inner {
            Inner::Terminal(multi) => {
                // Printing is best effort: a closed terminal must not fail the deploy.
                let _ = multi.println(text.trim_end_matches('\n'));
            }
            Inner::Writer(w) => {
                let mut w = match w.lock() {
                    Ok(w) => w,
                    Err(poisoned) => poisoned.into_inner(),
                };
                let _ = writeln!(w, "{}", text.trim_end_matches('\n'));
                let _ = w.flush();
            }
        }
    }

    /// Starts the progress display of one stack operation.
    pub fn progress(&self, label: &str) -> Progress<'_> {
        let bar = match &self.inner {
            Inner::Terminal(multi) => {
                let bar = multi.add(ProgressBar::new_spinner());
                if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
                    bar.set_style(style);
                }
                bar.set_message(label.to_owned());
                bar.enable_steady_tick(Duration::from_millis(120));
                Some(bar)
            }
            Inner::Writer(_) => None,
        };
        Progress {
            console: self,
            bar,
            label: label.to_owned(),
        }
    }
}

/// One stack operation's spinner (nothing on a plain console).
pub struct Progress<'a> {
    console: &'a Console,
    bar: Option<ProgressBar>,
    label: String,
}

impl Progress<'_> {
    /// Prints an event line above the spinner.
    pub fn event(&self, line: &str) {
        self.console.line(line);
    }

    /// Shows the stack's current status on the spinner.
    pub fn status(&self, status: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} {status}", self.label));
        }
    }
}

impl Drop for Progress<'_> {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Asks the user to confirm a step.
pub trait Prompt {
    /// Asks `question`; true to go ahead.
    fn confirm(&mut self, console: &Console, question: &str) -> Result<bool, DeployError>;
}

/// Reads `y`/`yes` from standard input; anything else, or end of input, is no.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdinPrompt;

impl Prompt for StdinPrompt {
    fn confirm(&mut self, console: &Console, question: &str) -> Result<bool, DeployError> {
        console.line(&format!("{question} [y/N]"));
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(DeployError::Prompt)?;
        Ok(is_yes(&answer))
    }
}

/// Fixed answers, in order (no when they run out). For tests and scripted callers.
#[derive(Clone, Debug, Default)]
pub struct Answers {
    answers: std::collections::VecDeque<bool>,
    /// The questions asked so far.
    pub asked: Vec<String>,
}

impl Answers {
    /// These answers.
    pub fn new(answers: impl IntoIterator<Item = bool>) -> Answers {
        Answers {
            answers: answers.into_iter().collect(),
            asked: Vec::new(),
        }
    }
}

impl Prompt for Answers {
    fn confirm(&mut self, console: &Console, question: &str) -> Result<bool, DeployError> {
        let answer = self.answers.pop_front().unwrap_or(false);
        console.line(&format!(
            "{question} [y/N] {}",
            if answer { "y" } else { "n" }
        ));
        self.asked.push(question.to_owned());
        Ok(answer)
    }
}

/// Whether an answer means yes.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_console_and_answers() {
        let (console, out) = Console::capture();
        console.line("hello");
        let p = console.progress("stack");
        p.event("  line");
        p.status("CREATE_IN_PROGRESS");
        drop(p);
        let mut a = Answers::new([true]);
        assert!(matches!(a.confirm(&console, "Deploy?"), Ok(true)));
        assert!(matches!(a.confirm(&console, "Again?"), Ok(false)));
        assert_eq!(
            out.text(),
            "hello\n  line\nDeploy? [y/N] y\nAgain? [y/N] n\n"
        );
        assert!(is_yes(" Y\n") && is_yes("yes") && !is_yes("") && !is_yes("no"));
    }
}
