// Package vram estimates the GPU memory of training and inference runs.
package vram
