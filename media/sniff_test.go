package media

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"
)

func mediaZip(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i, file := range files {
		h := &zip.FileHeader{Name: file[0], Method: zip.Deflate}
		if i == 0 {
			h.Method = zip.Store
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(file[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mediaFtyp(brand string, compatible ...string) []byte {
	box := []byte(brand + "\x00\x00\x02\x00" + strings.Join(compatible, ""))
	return append(append(mediaBE32(uint32(8+len(box))), "ftyp"...), append(box, make([]byte, 32)...)...)
}

func mediaBE32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func mediaUTF16(s string) string { return string(utf16le(s)) }

func TestSniff(t *testing.T) {
	t.Parallel()
	ole := func(stream string) []byte {
		return append(append([]byte(nil), oleMagic...), append(make([]byte, 500), mediaUTF16(stream)...)...)
	}
	cases := []struct {
		name string
		data []byte
		want string
		kind string
	}{
		{"png", mediaPNG(t), "image/png", KindImage},
		{"jpeg", mediaJPEG(t), "image/jpeg", KindImage},
		{"gif", mediaGIF(t), "image/gif", KindImage},
		{"webp", mediaWebP(), "image/webp", KindImage},
		{"heic", mediaFtyp("heic", "mif1heic"), "image/heic", KindImage},
		{"mp4", mediaFtyp("isom", "isomiso2avc1mp41"), "video/mp4", KindVideo},
		{"mp4 without mp4 brand", mediaFtyp("avc1", "avc1"), "video/mp4", KindVideo},
		{"m4a", mediaFtyp("M4A ", "M4A mp42isom"), "audio/mp4", KindAudio},
		{"quicktime", mediaFtyp("qt  ", "qt  "), "video/quicktime", KindVideo},
		{"3gp", mediaFtyp("3gp4", "isom3gp4"), "video/3gpp", KindVideo},
		{"webm", []byte("\x1A\x45\xDF\xA3\x9f\x42\x86\x81\x01\x42\x82\x84webm"), "video/webm", KindVideo},
		{"matroska", []byte("\x1A\x45\xDF\xA3\xa3\x42\x86\x81\x01\x42\x82\x88matroska"), "video/x-matroska", KindVideo},
		{"avi", []byte("RIFF\x00\x00\x00\x00AVI LIST"), "video/avi", KindVideo},
		{"ogg opus", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x01\x13OpusHead\x01\x01"), "audio/ogg", KindAudio},
		{"ogg vorbis", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x01\x1e\x01vorbis"), "audio/ogg", KindAudio},
		{"ogg theora", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x01\x2a\x80theora"), "video/ogg", KindVideo},
		{"mp3 id3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00"), "audio/mpeg", KindAudio},
		{"mp3 frame", []byte("\xFF\xFB\x90\x64\x00\x00\x00\x00"), "audio/mpeg", KindAudio},
		{"aac adts", []byte("\xFF\xF1\x50\x80\x02\x1F\xFC"), "audio/aac", KindAudio},
		{"amr", []byte("#!AMR\n\x3c\x00"), "audio/amr", KindAudio},
		{"flac", []byte("fLaC\x00\x00\x00\x22"), "audio/flac", KindAudio},
		{"wav", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), "audio/wave", KindAudio},
		{"pdf", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), "application/pdf", KindDocument},
		{"docx", mediaZip(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"_rels/.rels", "<Relationships/>"}, [2]string{"word/document.xml", "<w:document/>"}),
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document", KindDocument},
		{"xlsx", mediaZip(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"xl/workbook.xml", "<workbook/>"}),
			"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", KindDocument},
		{"pptx", mediaZip(t, [2]string{"[Content_Types].xml", "<Types/>"}, [2]string{"ppt/presentation.xml", "<p:presentation/>"}),
			"application/vnd.openxmlformats-officedocument.presentationml.presentation", KindDocument},
		{"odt", mediaZip(t, [2]string{"mimetype", "application/vnd.oasis.opendocument.text"}, [2]string{"content.xml", "<office/>"}),
			"application/vnd.oasis.opendocument.text", KindDocument},
		{"epub", mediaZip(t, [2]string{"mimetype", "application/epub+zip"}, [2]string{"META-INF/container.xml", "<container/>"}),
			"application/epub+zip", KindDocument},
		{"plain zip", mediaZip(t, [2]string{"a.txt", "hello"}), "application/zip", KindDocument},
		{"doc", ole("WordDocument"), "application/msword", KindDocument},
		{"xls", ole("Workbook"), "application/vnd.ms-excel", KindDocument},
		{"ppt", ole("PowerPoint Document"), "application/vnd.ms-powerpoint", KindDocument},
		{"other ole", ole("Something"), "application/x-ole-storage", KindDocument},
		{"rtf", []byte(`{\rtf1\ansi hello}`), "application/rtf", KindDocument},
		{"text", []byte("name,phone\nann,123\n"), "text/plain; charset=utf-8", KindDocument},
		{"binary", []byte{0, 1, 2, 3, 4, 5}, "application/octet-stream", KindDocument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Sniff(c.data)
			if got != c.want {
				t.Fatalf("Sniff = %q, want %q", got, c.want)
			}
			if k := Kind(got); k != c.kind {
				t.Fatalf("Kind(%q) = %q, want %q", got, k, c.kind)
			}
		})
	}
}

func TestKind(t *testing.T) {
	t.Parallel()
	for mt, want := range map[string]string{
		"image/png":                 KindImage,
		"IMAGE/JPEG":                KindImage,
		"video/mp4":                 KindVideo,
		"audio/ogg; codecs=opus":    KindAudio,
		"application/ogg":           KindAudio,
		"application/pdf":           KindDocument,
		"text/plain; charset=utf-8": KindDocument,
		"":                          KindDocument,
	} {
		if got := Kind(mt); got != want {
			t.Errorf("Kind(%q) = %q, want %q", mt, got, want)
		}
	}
}
