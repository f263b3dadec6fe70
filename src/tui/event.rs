//! Keys to actions: a pure function of the key and a little context, so key handling is
//! tested without a terminal. Only key presses act; releases (and repeats the terminal
//! reports as separate kinds) are ignored, so a key acts once.

use super::action::{Action, Field, Kill, Move, View};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What the key mapping depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyContext {
    /// The view shown.
    pub view: View,
    /// Whether the name filter is being typed.
    pub filter_editing: bool,
    /// Whether the archive is still being made (only cancel and quit apply).
    pub loading: bool,
    /// Whether a name filter is kept (Esc in the table clears it).
    pub filter_kept: bool,
    /// Whether a search form field is being edited (keys type into it).
    pub search_editing: bool,
    /// Whether the search field being edited is text (the prior file's path): the
    /// arrows move its cursor instead of stepping a value.
    pub text_field: bool,
    /// Whether the playground's text (or the prior's selected count) is being edited.
    pub editing: bool,
    /// The write prompt, if open.
    pub prompt: Prompt,
}

/// The write prompt's state, as far as keys care.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Prompt {
    /// No prompt.
    #[default]
    None,
    /// Typing the output path.
    Path,
    /// Asking whether to replace a file (y/n).
    Confirm,
    /// Asking whether to quit with changes that were not written (y/n).
    Quit,
}

/// One line of the key bar: `(keys, what)`.
pub type KeyHint = (&'static str, &'static str);

/// Maps a terminal event to an action. Anything but a key press maps to `None`.
pub fn map_event(ctx: KeyContext, event: &Event) -> Option<Action> {
    match event {
        Event::Key(k) => map_key(ctx, *k),
        _ => None,
    }
}

/// The cursor keys of a one-line text field.
fn cursor(code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Left => Some(Action::Cursor(Move::Left)),
        KeyCode::Right => Some(Action::Cursor(Move::Right)),
        KeyCode::Home => Some(Action::Cursor(Move::Home)),
        KeyCode::End => Some(Action::Cursor(Move::End)),
        KeyCode::Delete => Some(Action::DeleteForward),
        _ => None,
    }
}

/// Maps a key event to an action; `None` for releases and unbound keys.
pub fn map_key(ctx: KeyContext, key: KeyEvent) -> Option<Action> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('q')) {
        return Some(Action::Quit);
    }
    let typing = ctx.filter_editing
        || ctx.prompt == Prompt::Path
        || (ctx.search_editing && ctx.prompt == Prompt::None)
        || (ctx.editing && ctx.prompt == Prompt::None);
    if ctrl && typing {
        return match key.code {
            KeyCode::Char('u') => Some(Action::Kill(Kill::Line)),
            KeyCode::Char('w') => Some(Action::Kill(Kill::Word)),
            KeyCode::Char('r') if ctx.view == View::Playground => Some(Action::PlayRun),
            _ => None,
        };
    }
    if ctx.loading {
        return match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            KeyCode::Char('x') | KeyCode::Esc => Some(Action::Cancel),
            _ => None,
        };
    }
    if ctx.filter_editing {
        return match key.code {
            KeyCode::Enter | KeyCode::Down | KeyCode::Up => Some(Action::FilterAccept),
            KeyCode::Esc => Some(Action::FilterClear),
            KeyCode::Backspace => Some(Action::FilterBackspace),
            KeyCode::Char(c) if !ctrl => Some(Action::FilterChar(c)),
            k => cursor(k),
        };
    }
    match ctx.prompt {
        Prompt::Path => {
            return match key.code {
                KeyCode::Enter => Some(Action::PromptAccept),
                KeyCode::Esc => Some(Action::PromptCancel),
                KeyCode::Backspace => Some(Action::PromptBackspace),
                KeyCode::Char(c) if !ctrl => Some(Action::PromptChar(c)),
                k => cursor(k),
            }
        }
        Prompt::Confirm | Prompt::Quit => {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => Some(Action::Confirm(true)),
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {
                    Some(Action::Confirm(false))
                }
                _ => None,
            }
        }
        Prompt::None => {}
    }
    if ctx.search_editing {
        if ctx.text_field {
            if let Some(a) = cursor(key.code) {
                return Some(a);
            }
        }
        return match key.code {
            KeyCode::Enter => Some(Action::SearchEditDone),
            KeyCode::Esc => Some(Action::SearchEditCancel),
            KeyCode::Tab | KeyCode::Down => Some(Action::SearchNextField),
            KeyCode::BackTab | KeyCode::Up => Some(Action::SearchPrevField),
            KeyCode::Backspace => Some(Action::SearchBackspace),
            KeyCode::Right => Some(Action::SearchMore),
            KeyCode::Left => Some(Action::SearchLess),
            KeyCode::Char(c) if !ctrl => Some(Action::SearchChar(c)),
            _ => None,
        };
    }
    if ctx.editing {
        if ctx.view == View::Playground {
            return match key.code {
                KeyCode::Esc => Some(Action::EditDone),
                KeyCode::Enter => Some(Action::Newline),
                KeyCode::Backspace => Some(Action::Backspace),
                KeyCode::Up => Some(Action::Cursor(Move::Up)),
                KeyCode::Down => Some(Action::Cursor(Move::Down)),
                KeyCode::F(5) => Some(Action::PlayRun),
                KeyCode::Tab => Some(Action::Type(' ')),
                KeyCode::Char(c) if !ctrl => Some(Action::Type(c)),
                k => cursor(k),
            };
        }
        // The prior's count.
        return match key.code {
            KeyCode::Enter => Some(Action::EditDone),
            KeyCode::Esc => Some(Action::EditCancel),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Char(c @ '0'..='9') => Some(Action::Type(c)),
            KeyCode::Char('+') | KeyCode::Char('=') => Some(Action::SearchMore),
            KeyCode::Char('-') => Some(Action::SearchLess),
            KeyCode::Up | KeyCode::Down => Some(Action::EditDone),
            _ => None,
        };
    }
    // Keys of the current view first, then global ones.
    let local = match ctx.view {
        View::Table => match key.code {
            KeyCode::Char('s') => Some(Action::SortNext),
            KeyCode::Char('S') => Some(Action::SortReverse),
            KeyCode::Char('/') => Some(Action::FilterStart),
            KeyCode::Enter => Some(Action::Enter),
            KeyCode::Char('r') => Some(Action::Show(View::Search)),
            _ => None,
        },
        View::Tree => match key.code {
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Char('+') => Some(Action::Expand),
            KeyCode::Left | KeyCode::Char('h') | KeyCode::Char('-') => Some(Action::Collapse),
            KeyCode::Enter | KeyCode::Char(' ') => Some(Action::Enter),
            KeyCode::Char('e') => Some(Action::ExpandAll),
            KeyCode::Char('c') => Some(Action::CollapseAll),
            KeyCode::Char('r') => Some(Action::Show(View::Search)),
            _ => None,
        },
        View::Search => match key.code {
            KeyCode::Enter | KeyCode::Char('e') => Some(Action::SearchEdit),
            KeyCode::Char('r') => Some(Action::SearchRun),
            KeyCode::Char('b') => Some(Action::SearchField(Field::Budget)),
            KeyCode::Char('d') => Some(Action::SearchField(Field::Depth)),
            KeyCode::Char('n') => Some(Action::SearchField(Field::Nodes)),
            KeyCode::Char('p') => Some(Action::SearchField(Field::Prior)),
            KeyCode::Char('f') => Some(Action::SearchField(Field::PriorFile)),
            KeyCode::Char('+') | KeyCode::Char('=') => Some(Action::SearchMore),
            KeyCode::Char('-') => Some(Action::SearchLess),
            KeyCode::Right | KeyCode::Char(' ') => Some(Action::SearchNextField),
            KeyCode::Left => Some(Action::SearchPrevField),
            KeyCode::Char('w') => Some(Action::SearchWrite),
            KeyCode::Char('B') => Some(Action::Show(View::Sweep)),
            KeyCode::Char('P') => Some(Action::Show(View::Prior)),
            _ => None,
        },
        View::Archive => match key.code {
            KeyCode::Enter => Some(Action::Open),
            KeyCode::Char('r') => Some(Action::SearchRun),
            _ => None,
        },
        View::Changes => match key.code {
            KeyCode::Char('d') | KeyCode::Delete | KeyCode::Backspace => Some(Action::Drop),
            KeyCode::Char('w') => Some(Action::SearchWrite),
            KeyCode::Enter => Some(Action::Open),
            _ => None,
        },
        View::Playground => match key.code {
            KeyCode::Char('e') | KeyCode::Enter => Some(Action::EditStart),
            KeyCode::Char('r') => Some(Action::PlayRun),
            KeyCode::Char('w') => Some(Action::SearchWrite),
            KeyCode::Char('o') => Some(Action::PlayOpen),
            _ => None,
        },
        View::Sweep => match key.code {
            KeyCode::Char('r') => Some(Action::SearchRun),
            KeyCode::Char('t') => Some(Action::SweepTarget),
            KeyCode::Char('+') | KeyCode::Char('=') => Some(Action::SearchMore),
            KeyCode::Char('-') => Some(Action::SearchLess),
            KeyCode::Char('P') => Some(Action::Show(View::Prior)),
            _ => None,
        },
        View::Prior => match key.code {
            KeyCode::Left | KeyCode::Char('h') => Some(Action::PriorContext(false)),
            KeyCode::Right | KeyCode::Char('l') => Some(Action::PriorContext(true)),
            KeyCode::Char('e') | KeyCode::Enter => Some(Action::EditStart),
            KeyCode::Char('+') | KeyCode::Char('=') => Some(Action::SearchMore),
            KeyCode::Char('-') => Some(Action::SearchLess),
            KeyCode::Char('c') => Some(Action::PriorCalibrate),
            KeyCode::Char('s') => Some(Action::PriorSave),
            KeyCode::Char('r') => Some(Action::Show(View::Search)),
            _ => None,
        },
        View::Help => match key.code {
            KeyCode::Right | KeyCode::Char('l') | KeyCode::PageDown => Some(Action::NextPage),
            KeyCode::Left | KeyCode::Char('h') | KeyCode::PageUp => Some(Action::PrevPage),
            KeyCode::Char('n') | KeyCode::Char(' ') | KeyCode::Enter => Some(Action::StepNext),
            KeyCode::Char('p') | KeyCode::Backspace => Some(Action::StepPrev),
            KeyCode::Char('o') => Some(Action::PlayOpen),
            _ => None,
        },
        View::Text | View::Why | View::Plots | View::Verify => None,
    };
    if local.is_some() {
        return local;
    }
    match key.code {
        KeyCode::Char('q') => Some(Action::Quit),
        KeyCode::Char('?') => Some(Action::Show(View::Help)),
        KeyCode::Esc => Some(Action::Back),
        KeyCode::Tab => Some(Action::NextView),
        KeyCode::BackTab => Some(Action::PrevView),
        KeyCode::Char(c @ '0'..='9') => View::of_digit(c).map(Action::Show),
        KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
        KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
        KeyCode::PageUp => Some(Action::PageUp),
        KeyCode::PageDown => Some(Action::PageDown),
        KeyCode::Home | KeyCode::Char('g') => Some(Action::Home),
        KeyCode::End | KeyCode::Char('G') => Some(Action::End),
        KeyCode::Char('v') => Some(Action::VerifyOne),
        KeyCode::Char('V') => Some(Action::VerifyAll),
        KeyCode::Char('x') => Some(Action::Cancel),
        KeyCode::Char('r') => Some(Action::Show(View::Search)),
        _ => None,
    }
}

/// The keys shown at the bottom of a view.
pub fn hints(ctx: KeyContext) -> &'static [KeyHint] {
    if ctx.loading {
        return &[("x/Esc", "cancel"), ("q", "quit")];
    }
    if ctx.filter_editing {
        return &[
            ("type", "filter by name"),
            ("←→", "cursor"),
            ("^U/^W", "clear/word"),
            ("Enter", "keep"),
            ("Esc", "clear"),
        ];
    }
    match ctx.prompt {
        Prompt::Path => {
            return &[
                ("type", "path"),
                ("←→", "cursor"),
                ("^U/^W", "clear/word"),
                ("Enter", "write"),
                ("Esc", "cancel"),
            ]
        }
        Prompt::Confirm => return &[("y", "replace"), ("n/Esc", "keep the file")],
        Prompt::Quit => return &[("y", "quit without writing"), ("n/Esc", "stay")],
        Prompt::None => {}
    }
    if ctx.search_editing {
        if ctx.text_field {
            return &[
                ("type", "path"),
                ("←→", "cursor"),
                ("^U/^W", "clear/word"),
                ("Tab ↑↓", "field"),
                ("Enter", "done"),
                ("Esc", "undo"),
            ];
        }
        return &[
            ("type", "value"),
            ("⌫", "delete"),
            ("+/- ←→", "step"),
            ("Tab ↑↓", "field"),
            ("Enter", "done"),
            ("Esc", "undo"),
        ];
    }
    if ctx.editing {
        if ctx.view == View::Playground {
            return &[
                ("type", "program"),
                ("arrows", "cursor"),
                ("^R/F5", "run"),
                ("^U/^W", "clear/word"),
                ("Esc", "done"),
            ];
        }
        return &[
            ("digits", "count"),
            ("+/-", "step"),
            ("Enter", "done"),
            ("Esc", "undo"),
        ];
    }
    match ctx.view {
        View::Table if ctx.filter_kept => &[
            ("↑↓", "move"),
            ("Enter", "tree"),
            ("/", "edit filter"),
            ("Esc", "clear filter"),
            ("s/S", "sort/rev"),
            ("r", "search"),
            ("v/V", "verify"),
            ("?", "help"),
            ("q", "quit"),
        ],
        View::Table => &[
            ("↑↓", "move"),
            ("Enter", "tree"),
            ("s/S", "sort/rev"),
            ("/", "filter"),
            ("r", "search"),
            ("v/V", "verify"),
            ("Tab", "views"),
            ("?", "help"),
            ("q", "quit"),
        ],
        View::Tree => &[
            ("↑↓", "move"),
            ("→/←", "expand/collapse"),
            ("Enter", "toggle"),
            ("e/c", "all"),
            ("r", "search"),
            ("Esc", "table"),
            ("Tab", "views"),
            ("q", "quit"),
        ],
        View::Text | View::Why => &[
            ("↑↓ PgUp PgDn", "scroll"),
            ("Esc", "table"),
            ("Tab", "views"),
            ("?", "help"),
            ("q", "quit"),
        ],
        View::Plots => &[
            ("↑↓", "tensor"),
            ("Esc", "table"),
            ("Tab", "views"),
            ("q", "quit"),
        ],
        View::Search => &[
            ("e/Enter", "edit"),
            ("b/d/n/p/f", "field"),
            ("+/-", "×2 ÷2"),
            ("r", "run"),
            ("x", "cancel"),
            ("w", "write"),
            ("B/P", "sweep/prior"),
            ("↑↓", "tensor"),
            ("PgUp/PgDn", "scroll"),
            ("q", "quit"),
        ],
        View::Verify => &[
            ("v", "verify selected"),
            ("V", "verify all"),
            ("x", "cancel"),
            ("Esc", "table"),
            ("q", "quit"),
        ],
        View::Archive => &[
            ("↑↓", "tensor"),
            ("Enter", "why"),
            ("r", "analyse again"),
            ("x", "cancel"),
            ("Esc", "table"),
            ("q", "quit"),
        ],
        View::Changes => &[
            ("↑↓", "change"),
            ("w", "write all"),
            ("d", "drop"),
            ("Enter", "search view"),
            ("Esc", "table"),
            ("q", "quit"),
        ],
        View::Playground => &[
            ("e/Enter", "edit"),
            ("r", "check and run"),
            ("w", "write"),
            ("o", "load the tensor's"),
            ("Esc", "table"),
            ("q", "quit"),
        ],
        View::Sweep => &[
            ("r", "run"),
            ("t", "tensor/sample"),
            ("+/-", "limit"),
            ("x", "cancel"),
            ("↑↓", "tensor"),
            ("P", "prior"),
            ("q", "quit"),
        ],
        View::Prior => &[
            ("↑↓", "production"),
            ("←→", "context"),
            ("e +/-", "edit count"),
            ("c", "calibrate"),
            ("s", "save"),
            ("r", "search"),
            ("q", "quit"),
        ],
        View::Help => &[
            ("←/→", "page"),
            ("n/Space", "step"),
            ("p", "step back"),
            ("o", "playground"),
            ("Esc", "back"),
            ("q", "quit"),
        ],
    }
}
