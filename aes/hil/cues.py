"""What a question must name to ask about a blocker (the registry's ``keywords``), and the checks
that keep those names specific.

Each of a blocker's keywords is a *cue*: the words a question must contain, all of them, in any
order ("grace period days" is asked by "How many days is the grace period?"). Words are compared
lower-case, without a plural ``s``, without stop words and question words (what, how, much,
...); ``terms.md`` and ``request_timeout`` also count as their parts.

A cue must say which withheld detail the question is about, so that asking is measured, not
guessing words. The registry is rejected (``hil.unspecific_keywords``, naming blocker, cue and
what asked it) when one of its cues

* is answered by a question that could be asked of any task (:data:`GENERIC_QUESTIONS`: "How
  much?", "Is there a maximum?", "Any deadline?", off-topic ones): such a question would earn
  the blocker;
* is all words of one sentence of the instruction: every question about that sentence would
  earn it (a cue must name what is withheld, e.g. "grace period days", not only what the
  instruction says, "grace period");
* has no content word left.
"""

from __future__ import annotations

import re

STOP = frozenset(
    "a an the of to for in on at and or is are was were be been being which what whats how when where who whom "
    "whose why do does did doing done should would could can may might must shall will i we you it its this that "
    "these those with by from as if then than so any some there here me my our your us they them their he she his "
    "her please about much many there's it's i'm tell know want need use used using".split())
"""Words that say nothing about which detail a question is after."""
_TOKEN = re.compile(r"[a-z0-9%$]+(?:[._'][a-z0-9%$]+)*")
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\n+")

GENERIC_QUESTIONS = (
    "How much?", "How many?", "Is there a maximum?", "Is there a minimum?", "Any deadline?", "What is the deadline?",
    "What is the limit?", "Is there a limit?", "What threshold should I use?", "What rate should I use?",
    "What percentage?", "Which one should I use?", "Which option is correct?", "What is the default?",
    "What format should the output be in?", "What units should I use?", "How should I round?",
    "How should I sort the results?", "In what order?", "Which date should I use?", "Which column should I use?",
    "What time zone?", "How long?", "How many days?", "How many hours?", "How many minutes?", "What counts?",
    "What should I exclude?", "Are there exceptions?", "Is anything excluded?", "Which of the two is right?",
    "The documents disagree: which one is correct?", "What about edge cases?",
    "What should happen with invalid input?", "What should happen when a value is missing?",
    "Is there anything else I should know?", "Can you clarify the requirements?", "What are the exact requirements?",
    "How do I run the tests?", "Where are the input files?", "Which Python version is installed?",
    "Can I install packages?", "What is the weather like today?", "Who are you?",
    "Should I keep the existing behaviour?", "Is the current value correct?", "What is the policy?",
    "What are the rules?", "What is the standard?", "Do you have a preference?", "Is that per item or in total?",
    "Should it be inclusive or exclusive?", "What is the window?", "Does it reset?", "Should I count them?",
    "What is the priority?", "What is the target?", "What are the settings?", "What is the unit?",
    "Which status counts?", "What is the cap?", "What amount?", "Which numbers are right?", "What is missing?",
)
"""Questions that could be asked of any task: none may ask about a blocker (the admission bank;
tests score a different list of generic questions)."""


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> frozenset[str]:
    """The content words of ``text``, normalised as cues and questions are compared."""
    found = set()
    for token in _TOKEN.findall((text or "").lower()):
        token = token.strip("'")
        for part in {token, *re.split(r"[._']", token)}:
            if part and part not in STOP:
                found.add(_stem(part))
    return frozenset(found)


def cues(keywords) -> list[frozenset[str]]:
    """Each keyword as the word set a question must contain (empty sets dropped)."""
    return [cue for cue in (words(k) for k in keywords) if cue]


def asks_about(question: str, keywords) -> bool:
    """Whether ``question`` names every word of one of ``keywords``."""
    asked = words(question)
    return any(cue <= asked for cue in cues(keywords))


def sentences(instruction: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE.split(instruction or "")) if s]


def unspecific(keywords, instruction: str) -> list[str]:
    """Why some of ``keywords`` do not single out their blocker (empty: they all do)."""
    found = []
    by_sentence = [(s, words(s)) for s in sentences(instruction)]
    for keyword in keywords:
        cue = words(keyword)
        if not cue:
            found.append(f"{keyword!r} has no word beyond stop and question words")
            continue
        generic = next((q for q in GENERIC_QUESTIONS if cue <= words(q)), None)
        if generic:
            found.append(f"{keyword!r} is asked by the generic question {generic!r}")
            continue
        sentence = next((s for s, w in by_sentence if cue <= w), None)
        if sentence:
            found.append(f"{keyword!r} is all words of the instruction's {sentence[:100]!r}: any question about "
                         "that sentence would ask it")
    return found
