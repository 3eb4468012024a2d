// Command chooser prints what a Go program leaves to the runtime and the
// host: map order, select's choice among ready cases, goroutines woken at
// once, math/rand's and crypto/rand's draws, and the clocks.
package main

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

func main() {
	m := make(map[int]int)
	for i := range 64 {
		m[i] = i
	}
	var order []int
	for k := range m {
		order = append(order, k)
	}
	fmt.Println("map:", order[:16])

	a, b := make(chan int, 100), make(chan int, 100)
	for i := range 100 {
		a <- i
		b <- i
	}
	var picks []byte
	for range 64 {
		select {
		case <-a:
			picks = append(picks, 'a')
		case <-b:
			picks = append(picks, 'b')
		}
	}
	fmt.Println("select:", string(picks))

	var mu sync.Mutex
	var woke []int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			mu.Lock()
			woke = append(woke, i)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	fmt.Println("woken:", woke)

	fmt.Println("math/rand:", rand.Uint64(), "crypto/rand:", crand.Text())
	t0 := time.Now()
	time.Sleep(time.Second)
	fmt.Println("now:", t0.UTC().Format(time.RFC3339Nano), "slept:", time.Since(t0))
}
