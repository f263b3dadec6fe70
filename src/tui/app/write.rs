//! The write prompt: pending changes written into a new archive, or the prior to a file.

use super::*;

impl App {
    /// Opens the write prompt for the pending changes, with a default path next to the
    /// archive that does not exist yet (`model.researched.brv`, then
    /// `model.researched-1.brv`, ...; see [`researched_path`]), or in the current folder
    /// when the archive lives in the temporary folder [`App::temp_dir`].
    pub(super) fn open_write_prompt(&mut self) {
        if self.search.writing.is_some() {
            self.status = "the archive is being written".into();
            return;
        }
        // In the Search view, say what became of the result shown.
        let mut about_result = None;
        if self.view == View::Search {
            if let Some(Ok(r)) = self.search_result() {
                if r.new.program == r.old.0 {
                    about_result = Some(
                        "nothing to write for this tensor: the search found the archive's own \
                         program"
                            .to_string(),
                    );
                } else if r.new.bytes > r.old.1 {
                    about_result = Some(format!(
                        "nothing written: the new program is {} bytes larger than the \
                         archive's (only a smaller program becomes a change to write)",
                        thousands(r.new.bytes - r.old.1)
                    ));
                } else if r.new.bytes == r.old.1 {
                    about_result = Some(
                        "nothing to write for this tensor: the new program is the same size \
                         as the archive's"
                            .to_string(),
                    );
                }
            }
        }
        if self.pending.is_empty() {
            self.status = about_result.unwrap_or_else(|| match self.view {
                View::Search => match (self.search.tensor, &self.search.result) {
                    (Some(t), Some(Ok(_))) if Some(t) != self.selected_tensor() => format!(
                        "nothing to write for this tensor: the last search ran on {} (r \
                         searches this one)",
                        self.row_name(t)
                    ),
                    _ => "nothing to write: run a search first (r)".into(),
                },
                _ => "nothing to write: no change is pending (a search's smaller result, \
                      or a playground program that restores its tensor)"
                    .into(),
            });
            return;
        }
        if let Some(a) = about_result {
            self.status = format!("{a}; the pending changes are written");
        }
        let Some(path) = self.source.as_ref().and_then(|s| s.path()) else {
            self.status = "this archive is not a file; nothing can be written".into();
            return;
        };
        // The demo's archive lives in a temporary folder that goes at exit: propose the
        // current folder instead, so that what the user writes stays.
        let in_temp = self
            .temp_dir
            .as_deref()
            .is_some_and(|t| path.parent().is_some_and(|p| same_file(p, t)));
        // A shard of a folder archive (`ckpt.brv/model-00002-of-00002.brv`): a new
        // file inside the folder is not named by its manifest and so never restored;
        // propose beside the folder (replacing the shard in place still works).
        let parent = path.parent().unwrap_or(std::path::Path::new(""));
        let in_folder_archive = parent.is_dir() && parent.extension().is_some_and(|e| e == "brv");
        let dir = if in_temp {
            std::path::Path::new(".")
        } else if in_folder_archive {
            parent.parent().unwrap_or(std::path::Path::new(""))
        } else {
            parent
        };
        let default = researched_path(dir, &path).display().to_string();
        self.search.prompt = Some(WritePrompt {
            kind: PromptKind::Archive,
            cursor: textfield::len(&default),
            path: default,
            confirm: None,
            error: None,
        });
    }

    /// `s` in the Prior view: asks where to save the prior (JSON, as `brevis calibrate`
    /// writes it).
    pub(super) fn open_prior_prompt(&mut self) {
        if self.prior_view.prior.is_none() {
            self.status = "no prior to save yet".into();
            return;
        }
        let stem = self
            .source
            .as_ref()
            .and_then(|s| s.path())
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "archive".into());
        let mut k = 0u32;
        let default = loop {
            let name = if k == 0 {
                format!("{stem}.prior.json")
            } else {
                format!("{stem}.prior-{k}.json")
            };
            if std::fs::symlink_metadata(&name).is_err() || k > 10_000 {
                break name;
            }
            k += 1;
        };
        self.search.prompt = Some(WritePrompt {
            kind: PromptKind::Prior,
            cursor: textfield::len(&default),
            path: default,
            confirm: None,
            error: None,
        });
    }

    /// Enter in the write prompt: write, or ask first when the path exists.
    pub(super) fn write_accept(&mut self) {
        let Some(p) = &mut self.search.prompt else {
            return;
        };
        let typed = p.path.trim().to_string();
        if typed.is_empty() {
            p.error = Some("type the path of the new file".into());
            return;
        }
        let target = std::path::PathBuf::from(&typed);
        // Never through a link, as the CLI refuses: the write replaces the link with a
        // file and leaves what it points at unchanged (a link to the open archive was
        // reported as replaced in place; found by a tester).
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            p.error = Some(format!(
                "{typed} is a symbolic link: type the path of a file (or remove the link)"
            ));
            return;
        }
        let open = self.source.as_ref().and_then(|s| s.path());
        let same = open.as_deref().is_some_and(|o| same_file(o, &target));
        if same && p.kind == PromptKind::Prior {
            p.error = Some(format!("{typed} is the open archive: type another path"));
            return;
        }
        if same {
            p.confirm = Some(format!(
                "{typed} is the open archive: replace it in place with the new programs? (y/n)"
            ));
        } else if std::fs::symlink_metadata(&target).is_ok() {
            if target.is_dir() {
                p.error = Some(format!("{typed} is a folder: type a file path"));
                return;
            }
            p.confirm = Some(format!("{typed} exists: replace it? (y/n)"));
        } else {
            self.start_write(false);
        }
    }

    /// Writes the prompt's file: a copy of the archive with every pending change (on a
    /// worker), or the prior.
    pub(super) fn start_write(&mut self, overwrite: bool) {
        let Some(prompt) = self.search.prompt.clone() else {
            return;
        };
        if prompt.kind == PromptKind::Prior {
            self.save_prior(&prompt.path, overwrite);
            return;
        }
        let Some(source) = self.source.clone() else {
            self.search.prompt = None;
            return;
        };
        if self.pending.is_empty() {
            self.search.prompt = None;
            return;
        }
        let target = std::path::PathBuf::from(prompt.path.trim());
        let in_place = source
            .path()
            .as_deref()
            .is_some_and(|o| same_file(o, &target));
        let changes: Vec<(usize, Node, Option<Settings>)> = self
            .pending
            .iter()
            .map(|p| (p.tensor, p.program.clone(), p.settings))
            .collect();
        let old_bytes = source.file_sizes().1;
        self.search.prompt = None;
        self.search.written = None;
        let handle = self.worker.spawn(move |ctx| {
            ctx.progress(0, 0, "writing");
            let refs: Vec<(usize, &Node, Option<Settings>)> =
                changes.iter().map(|(t, p, s)| (*t, p, *s)).collect();
            let r = source.rewrite(&target, &refs, overwrite).and_then(|bytes| {
                let reopened = if in_place {
                    Some(source.reopen()?)
                } else {
                    None
                };
                Ok((
                    WriteOutcome {
                        path: target,
                        bytes,
                        old_bytes,
                        in_place,
                        changes: changes.len(),
                    },
                    reopened,
                ))
            });
            Outcome::Written(r)
        });
        self.search.writing = Some(handle);
    }

    /// Writes the Prior view's prior to `path` as JSON (`brevis calibrate`'s format),
    /// replacing a file only when `overwrite`.
    pub(super) fn save_prior(&mut self, path: &str, overwrite: bool) {
        let Some(prior) = &self.prior_view.prior else {
            self.search.prompt = None;
            return;
        };
        let target = std::path::PathBuf::from(path.trim());
        let input = self
            .source
            .as_ref()
            .and_then(|s| s.path())
            .unwrap_or_default();
        let r = crate::archive::writer::write_output_file(
            &input,
            &target,
            overwrite,
            prior.to_json().as_bytes(),
        )
        .map_err(|e| e.to_string());
        self.search.prompt = None;
        match r {
            Ok(()) => {
                let note = format!("saved the prior to {}", target.display());
                self.prior_view.note = Some(note.clone());
                self.status = note;
                // The search takes it from the file now, as `--prior FILE` would.
                self.search.form.prior_path = target.display().to_string();
                self.search.prior_cursor = textfield::len(&self.search.form.prior_path);
            }
            Err(e) => {
                self.prior_view.note = Some(format!("not saved: {e}"));
                self.status = format!("error: {e}");
            }
        }
    }
}
