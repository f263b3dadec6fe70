//! The Verify view: decoding one tensor or the whole archive against the stored
//! checksums in the background.

use super::*;

impl App {
    pub(super) fn start_verify(&mut self, one: bool) {
        if self.verify.running.is_some() {
            self.status = "a verification is already running (x cancels it)".into();
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        let tensor = self.selected_tensor();
        if one && tensor.is_none() {
            return;
        }
        self.view = View::Verify;
        self.verify.result = None;
        let handle = self.worker.spawn(move |ctx| {
            let start = Instant::now();
            if one {
                let i = tensor.unwrap_or(0);
                let name = source.rows()[i].name.clone();
                ctx.progress(0, 1, &name);
                let check = source.verify_tensor(i);
                let mut out = VerifyOutcome {
                    tensor: Some(i),
                    tensors: 1,
                    exact: 0,
                    failures: Vec::new(),
                    whole_file: None,
                    seconds: 0.0,
                };
                match check {
                    Check::Exact => out.exact = 1,
                    Check::Mismatch(m) | Check::Failed(m) => out.failures.push(m),
                }
                out.seconds = start.elapsed().as_secs_f64();
                Outcome::Verified(Ok(out))
            } else {
                match worker::verify_all(source.as_ref(), ctx) {
                    Some(out) => Outcome::Verified(Ok(out)),
                    None => Outcome::Verified(Err("cancelled".into())),
                }
            }
        });
        self.verify.running = Some(handle);
    }
}
