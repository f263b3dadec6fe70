//! The Playground view: a program typed in its text form, run and sized against the
//! tensor, and written when it restores exactly.

use super::*;

impl App {
    /// `o`: loads the selected tensor's program (or, in a lesson, its example) into the
    /// playground.
    pub(super) fn play_open(&mut self) {
        if self.view == View::Help {
            if let Some(l) = self.page.checked_sub(1).and_then(|k| self.lessons.get(k)) {
                let text = l.program.to_string();
                let k = self.page - 1;
                self.play.load(&text, Origin::Lesson(k));
                self.show(View::Playground);
                self.status = format!(
                    "the example of lesson {}: edit it (e), check and run it (r)",
                    self.page
                );
            }
            return;
        }
        let (Some(source), Some(t)) = (self.source.clone(), self.selected_tensor()) else {
            return;
        };
        match source.program(t) {
            Ok(p) => {
                self.play.load(&p.to_string(), Origin::Tensor(t));
                self.status = format!(
                    "the program of {}: edit it (e), check and run it (r)",
                    self.row_name(t)
                );
            }
            Err(e) => self.play.result = Some(Err(e)),
        }
    }

    /// `r` in the playground: parses, type-checks, runs and sizes the program against
    /// its tensor (the words its record restores) or its lesson's example, on a worker.
    pub(super) fn start_play(&mut self) {
        if self.play.running.is_some() {
            return;
        }
        let Some(origin) = self.play.origin else {
            self.play_open();
            return;
        };
        let text = self.play.text();
        let source = self.source.clone();
        let lesson = match origin {
            Origin::Lesson(k) => self.lessons.get(k).map(|l| l.program.clone()),
            Origin::Tensor(_) => None,
        };
        self.play.result = None;
        let handle = self.worker.spawn(move |ctx| {
            let r = (|| {
                let (reference, context) = match (origin, lesson) {
                    (Origin::Lesson(_), Some(p)) => (p, None),
                    (Origin::Tensor(t), _) => {
                        let s = source.ok_or_else(|| "no archive".to_string())?;
                        (s.program(t)?, s.context(t))
                    }
                    _ => return Err("the lesson is gone".to_string()),
                };
                ctx.progress(0, 0, "decoding the tensor");
                let target =
                    crate::dsl::execute_in(&reference, reference.ty().len, context.as_ref())
                        .map_err(|e| format!("the archive's program does not run: {e}"))?;
                ctx.progress(0, 0, "checking");
                crate::tui::playground::check(&text, origin, &target, context.as_ref(), &reference)
            })();
            Outcome::Played(r.map(Box::new))
        });
        self.play.running = Some(handle);
    }

    /// `w` in the playground: keeps a program that restores its tensor as a pending
    /// change and asks where to write the pending changes.
    pub(super) fn play_write(&mut self) {
        let current = self.play.result_current();
        let Some(Ok(r)) = &self.play.result else {
            self.status = "check the program first (r): only a program that restores its \
                           tensor is written"
                .into();
            return;
        };
        if !current {
            self.status = "the text changed since the last check: r checks it again".into();
            return;
        }
        if !r.restores {
            self.status = "nothing written: the program does not restore the tensor".into();
            return;
        }
        let Origin::Tensor(t) = r.origin else {
            self.status = "a lesson's example is not in the archive: nothing to write".into();
            return;
        };
        if let Some(why) = self.unsearchable(t) {
            self.status = why.replace("nothing to search", "nothing to write");
            return;
        }
        if r.bytes == r.reference_bytes && r.diff.is_empty() {
            self.status = "nothing to write: the program is the archive's own".into();
            return;
        }
        let record = self
            .source
            .as_deref()
            .map_or(t, |s| crate::tui::sweep::record_key(s, t));
        let change = Pending {
            tensor: t,
            record,
            program: r.program.clone(),
            settings: None,
            old_bytes: r.reference_bytes,
            new_bytes: r.bytes,
            from: "playground".to_string(),
            delta: None,
        };
        self.add_pending(change, true);
        self.open_write_prompt();
    }
}
