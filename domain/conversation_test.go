package domain

import (
	"reflect"
	"testing"
)

// One reaction per reactor, the latest winning, an empty emoji taking it back; an older event
// arriving late changes nothing.
func TestReactions(t *testing.T) {
	var n MessageNotes
	n.React(Reaction{From: "1", Emoji: "👍", At: 10})
	n.React(Reaction{FromMe: true, Emoji: "❤️", At: 11})
	n.React(Reaction{From: "1", Emoji: "🎉", At: 12})
	if n.React(Reaction{From: "1", Emoji: "😡", At: 9}) {
		t.Fatal("an older reaction replaced a newer one")
	}
	if len(n.Reactions) != 2 || n.Reactions[0].Emoji != "🎉" || n.Reactions[1].Emoji != "❤️" {
		t.Fatalf("reactions %+v", n.Reactions)
	}
	n.React(Reaction{FromMe: true, Emoji: "", At: 13})
	if len(n.Reactions) != 1 || n.Reactions[0].From != "1" {
		t.Fatalf("a reaction taken back stays: %+v", n.Reactions)
	}
	if n.React(Reaction{From: "2", Emoji: "", At: 14}) {
		t.Fatal("taking back a reaction never made changed something")
	}
}

// A voter's later vote replaces the earlier one; the tally counts each option once per voter,
// in the poll's order, and ignores choices that are not options.
func TestVotesAndTally(t *testing.T) {
	var n MessageNotes
	n.SetVote(Vote{Voter: "1", Options: []string{"Yes"}, At: 10})
	n.SetVote(Vote{Voter: "2", Options: []string{"No", "Maybe"}, At: 11})
	n.SetVote(Vote{Voter: "1", Options: []string{"No"}, At: 12})
	if n.SetVote(Vote{Voter: "1", Options: []string{"Yes"}, At: 5}) {
		t.Fatal("an older vote replaced a newer one")
	}
	got := Tally([]string{"Yes", "No"}, n.Votes)
	want := []PollCount{{Name: "Yes", Voters: []string{}}, {Name: "No", Count: 2, Voters: []string{"1", "2"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tally %+v, want %+v", got, want)
	}
	n.SetVote(Vote{Voter: "2", Options: []string{}, At: 13}) // taken back
	if got := Tally([]string{"Yes", "No"}, n.Votes); got[1].Count != 1 {
		t.Fatalf("a vote taken back still counts: %+v", got)
	}
}

// A message's edit and revoke: the newest edit wins; a revoke is recorded once.
func TestEditAndRevoke(t *testing.T) {
	var n MessageNotes
	n.SetEdit(Edit{Text: "b", At: 20})
	if n.SetEdit(Edit{Text: "a", At: 10}) || n.Edit.Text != "b" {
		t.Fatalf("edit %+v", n.Edit)
	}
	if !n.Revoke(Revocation{At: 30}) || n.Revoke(Revocation{At: 31}) || n.Revoked.At != 30 {
		t.Fatalf("revoke %+v", n.Revoked)
	}
}

// Recipients: group ids are told from numbers; a message's preview is what a quote shows.
func TestGroupsAndPreview(t *testing.T) {
	if !IsGroup("120363025246125486@g.us") || IsGroup("4915112345678") {
		t.Fatal("IsGroup")
	}
	for _, tc := range []struct {
		m    Message
		want string
	}{
		{Message{Text: "hi"}, "hi"}, {Message{Caption: "pic"}, "pic"}, {Message{Question: "Q?"}, "Q?"},
		{Message{LocationName: "Shop", Address: "Street 1"}, "Shop"}, {Message{ContactName: "Ann"}, "Ann"}, {Message{}, ""},
	} {
		if got := tc.m.Preview(); got != tc.want {
			t.Errorf("Preview of %+v = %q, want %q", tc.m, got, tc.want)
		}
	}
	if KindEdit.Charged() || KindRevoke.Charged() || !KindReaction.Charged() || !KindPoll.Charged() || !KindSticker.Media() {
		t.Fatal("kinds: edits and revokes are not charged, reactions and polls are; stickers are media")
	}
}

func TestIsOneEmoji(t *testing.T) {
	for _, s := range []string{"👍", "❤️", "🎉", "🙏", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "🇩🇪", "1️⃣", "#️⃣", "©️", "☺", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "🫠"} {
		if !IsOneEmoji(s) {
			t.Errorf("%q (%U) is one emoji", s, []rune(s))
		}
	}
	for _, s := range []string{"", "<b>", "ok", "👍👍👍", "👍 ", "a👍", "👍a", "🇩", "🇩🇪🇫", "🇩🇪👍", "1", "12️⃣", "\u200d👍", "👍\u200d", "\ufe0f", "⃣"} {
		if IsOneEmoji(s) {
			t.Errorf("%q (%U) is not one emoji", s, []rune(s))
		}
	}
}
