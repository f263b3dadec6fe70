//! Editing a line of text at a cursor: the name filter, the write prompt's path, the
//! prior file's path, the playground's lines. The cursor counts characters (not bytes)
//! from the start of the line, `0..=len`.

use super::action::{Kill, Move};

/// Characters in `text`.
pub fn len(text: &str) -> usize {
    text.chars().count()
}

/// The byte offset of character `cursor` (the end when past it).
fn byte_at(text: &str, cursor: usize) -> usize {
    text.char_indices()
        .nth(cursor)
        .map_or(text.len(), |(b, _)| b)
}

/// Inserts `c` at the cursor and moves past it.
pub fn insert(text: &mut String, cursor: &mut usize, c: char) {
    *cursor = (*cursor).min(len(text));
    let at = byte_at(text, *cursor);
    text.insert(at, c);
    *cursor += 1;
}

/// Deletes the character before the cursor (Backspace); returns whether there was one.
pub fn backspace(text: &mut String, cursor: &mut usize) -> bool {
    *cursor = (*cursor).min(len(text));
    if *cursor == 0 {
        return false;
    }
    let at = byte_at(text, *cursor - 1);
    text.remove(at);
    *cursor -= 1;
    true
}

/// Deletes the character under the cursor (Delete); returns whether there was one.
pub fn delete(text: &mut String, cursor: &mut usize) -> bool {
    *cursor = (*cursor).min(len(text));
    if *cursor >= len(text) {
        return false;
    }
    let at = byte_at(text, *cursor);
    text.remove(at);
    true
}

/// Moves the cursor along the line (Up and Down do nothing on one line).
pub fn move_cursor(text: &str, cursor: &mut usize, m: Move) {
    let n = len(text);
    *cursor = match m {
        Move::Left => cursor.saturating_sub(1).min(n),
        Move::Right => (*cursor + 1).min(n),
        Move::Home => 0,
        Move::End => n,
        Move::Up | Move::Down => (*cursor).min(n),
    };
}

/// Ctrl-U (everything before the cursor) and Ctrl-W (the word or path component before
/// the cursor, with the spaces or `/` after it, back to the previous space or `/`, which
/// stays), as a shell does.
pub fn kill(text: &mut String, cursor: &mut usize, k: Kill) {
    *cursor = (*cursor).min(len(text));
    let at = byte_at(text, *cursor);
    let (head, tail) = text.split_at(at);
    let cut = match k {
        Kill::Line => 0,
        Kill::Word => {
            let trimmed = head.trim_end_matches([' ', '/']).len();
            head[..trimmed].rfind([' ', '/']).map_or(0, |i| i + 1)
        }
    };
    let new = format!("{}{tail}", &head[..cut]);
    *cursor = len(&head[..cut]);
    *text = new;
}

/// `text` with a cursor mark `▏` at the cursor.
pub fn with_cursor(text: &str, cursor: usize) -> String {
    let at = byte_at(text, cursor.min(len(text)));
    format!("{}▏{}", &text[..at], &text[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_moves_inserts_and_deletes_in_the_middle() {
        let mut t = String::from("model.brv");
        let mut c = len(&t);
        move_cursor(&t, &mut c, Move::Home);
        insert(&mut t, &mut c, 'x');
        assert_eq!((t.as_str(), c), ("xmodel.brv", 1));
        move_cursor(&t, &mut c, Move::End);
        for _ in 0..4 {
            move_cursor(&t, &mut c, Move::Left);
        }
        assert!(backspace(&mut t, &mut c));
        assert_eq!((t.as_str(), c), ("xmode.brv", 5));
        assert!(delete(&mut t, &mut c));
        assert_eq!(t, "xmodebrv");
        assert_eq!(with_cursor(&t, c), "xmode▏brv");
        // Wide characters are one character each.
        let mut w = String::from("名前");
        let mut c = 1;
        insert(&mut w, &mut c, '🙂');
        assert_eq!(w, "名🙂前");
        assert!(!delete(&mut w, &mut 3));
    }

    #[test]
    fn kill_keys_cut_before_the_cursor() {
        let mut t = String::from("/tmp/a/b.brv tail");
        let mut c = 12;
        kill(&mut t, &mut c, Kill::Word);
        assert_eq!((t.as_str(), c), ("/tmp/a/ tail", 7));
        kill(&mut t, &mut c, Kill::Word);
        assert_eq!((t.as_str(), c), ("/tmp/ tail", 5));
        kill(&mut t, &mut c, Kill::Line);
        assert_eq!((t.as_str(), c), (" tail", 0));
    }
}
