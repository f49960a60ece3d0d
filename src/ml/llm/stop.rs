//! Stop sequences on streamed text: text that might be the start of a stop sequence is
//! held back until it is clearly not, so a client never sees part of one.

/// Watches generated text for the first of several stop sequences.
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    hit: Option<usize>,
}

/// What one piece of text does to the stream.
#[derive(Debug, PartialEq, Eq)]
pub struct StopStep {
    /// Text that can be sent now.
    pub emit: String,
    /// A stop sequence was found: generation ends, `emit` is everything before it.
    pub stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops`. Empty strings never match; [`hit`](Self::hit) counts
    /// positions in `stops` as given.
    pub fn new(stops: &[String]) -> Self {
        Self {
            stops: stops.to_vec(),
            held: String::new(),
            hit: None,
        }
    }

    /// Which of the stop sequences (its position as given) ended the text, once one has.
    pub fn hit(&self) -> Option<usize> {
        self.hit
    }

    /// Adds `text`; returns what may be emitted and whether a stop sequence was hit.
    pub fn push(&mut self, text: &str) -> StopStep {
        self.held.push_str(text);
        if let Some((at, which)) = self
            .stops
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .filter_map(|(i, s)| self.held.find(s.as_str()).map(|at| (at, i)))
            .min()
        {
            self.hit = Some(which);
            let emit = self.held[..at].to_owned();
            self.held.clear();
            return StopStep {
                emit,
                stopped: true,
            };
        }
        // Keep the longest tail that is a prefix of some stop sequence.
        let keep = self
            .held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &self.held[i..];
                self.stops
                    .iter()
                    .any(|s| !s.is_empty() && s.starts_with(tail))
            })
            .unwrap_or(self.held.len());
        let emit = self.held[..keep].to_owned();
        self.held.drain(..keep);
        StopStep {
            emit,
            stopped: false,
        }
    }

    /// Ends the stream without a stop: whatever was held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_a_possible_stop_and_cuts_before_it() {
        let mut m = StopMatcher::new(&["\nUser:".to_owned()]);
        assert_eq!(m.push("Hello\nU").emit, "Hello");
        let step = m.push("ser: more");
        assert_eq!(
            step,
            StopStep {
                emit: String::new(),
                stopped: true
            }
        );
    }

    #[test]
    fn releases_text_that_is_not_a_stop() {
        let mut m = StopMatcher::new(&["END".to_owned()]);
        assert_eq!(m.push("the E").emit, "the ");
        assert_eq!(m.push("xit").emit, "Exit");
        assert_eq!(m.push("EN").emit, "");
        assert_eq!(m.finish(), "EN");
    }

    #[test]
    fn names_the_stop_that_came_first() {
        let stops = ["".to_owned(), "C".to_owned(), "AB".to_owned()];
        let mut m = StopMatcher::new(&stops);
        assert_eq!(m.hit(), None);
        let step = m.push("xxABC");
        assert_eq!(step.emit, "xx");
        assert!(step.stopped);
        assert_eq!(m.hit(), Some(2));
    }

    #[test]
    fn no_stops_passes_everything() {
        let mut m = StopMatcher::new(&[]);
        assert_eq!(m.push("abc").emit, "abc");
    }
}
