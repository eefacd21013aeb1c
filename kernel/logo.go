package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
)

// The logo is a memory bar: four stacked blocks in the category colors the
// charts use (parameters, gradients, optimizer states, activations) on a dark
// rounded square.
var logoBlocks = []color.RGBA{
	{0x54, 0x70, 0xc6, 0xff}, // parameters
	{0x91, 0xcc, 0x75, 0xff}, // gradients
	{0xfa, 0xc8, 0x58, 0xff}, // optimizer states
	{0xee, 0x66, 0x66, 0xff}, // activations
}

const logoSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="64" height="64">
<rect width="64" height="64" rx="10" fill="#1f2430"/>
<rect x="14" y="8" width="36" height="10" rx="2" fill="#ee6666"/>
<rect x="14" y="20" width="36" height="10" rx="2" fill="#fac858"/>
<rect x="14" y="32" width="36" height="10" rx="2" fill="#91cc75"/>
<rect x="14" y="44" width="36" height="12" rx="2" fill="#5470c6"/>
</svg>
`

// logoPNG draws the same picture at n×n pixels.
func logoPNG(n int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	bg := color.RGBA{0x1f, 0x24, 0x30, 0xff}
	scale := func(v int) int { return v * n / 64 }
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			img.Set(x, y, bg)
		}
	}
	// Bottom to top, as in the SVG.
	rows := [][2]int{{44, 56}, {32, 42}, {20, 30}, {8, 18}}
	for i, r := range rows {
		for y := scale(r[0]); y < scale(r[1]); y++ {
			for x := scale(14); x < scale(50); x++ {
				img.Set(x, y, logoBlocks[i])
			}
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img) // encoding an in-memory RGBA image cannot fail
	return buf.Bytes()
}
